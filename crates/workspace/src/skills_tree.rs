//! A skills source's tree on its way into a sandbox: read as a tar (a bundle version's
//! archive, a host directory packed by [`crate::manifest::Archive`], or a tar of a checkout the
//! sandbox made itself), indexed (every folder holding a `SKILL.md` under the skills folder,
//! the tree's docs file) and, for trees the control plane holds, re-packed with every entry a
//! directory or regular file owned by the sandbox user under one prefix.
//!
//! The rules an upload passes are those of a bundle push ([`crate::bundle`]): names stay
//! inside the root, no `.git` (skipped: a checkout's own), no links or special members
//! (refused when re-packing, skipped when only indexing a tree already in the sandbox), at
//! most [`MAX_ARCHIVE_MEMBERS`] members and [`MAX_UNPACKED_BYTES`] of contents.

use crate::manifest::Archive;
use sandbox_agents_domain::bundle::{MAX_ARCHIVE_MEMBERS, MAX_UNPACKED_BYTES};
use sandbox_agents_domain::skills::{MAX_DOCS_BYTES, MAX_SKILL_MD_BYTES};
use std::io::{BufRead, BufReader, Read, Write};

/// How to read a tree.
#[derive(Clone, Debug, Default)]
pub struct TreeOptions {
    /// The folder of the tree that holds the skills (`subpath`); `None`: its root.
    pub subpath: Option<String>,
    /// A file at the tree's root to return (a `workspace_source`'s `docs_file`).
    pub docs_file: Option<String>,
    /// Leading name components to drop from every member (1 for an archive a backend made of a
    /// directory, whose members start with the directory's name).
    pub strip: usize,
    /// Skip links and special members instead of refusing the tree.
    pub skip_special: bool,
}

/// A folder holding a `SKILL.md`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundSkill {
    /// Relative to the skills folder; `""` when it is the skills folder itself.
    pub dir: String,
    /// The start of its `SKILL.md` (at most `MAX_SKILL_MD_BYTES`), lossily decoded.
    pub skill_md: String,
}

/// What a tree holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TreeIndex {
    /// Sorted by `dir`.
    pub skills: Vec<FoundSkill>,
    /// The docs file (at most `MAX_DOCS_BYTES`), when the tree has one.
    pub docs: Option<String>,
    pub files: u64,
    pub bytes: u64,
}

/// Reads `reader` (a tar, gzip-compressed or not) and indexes it. With `out`, also writes
/// the tree to it as a tar whose members are `<prefix>/<path>`, owned by the sandbox user.
/// The reason, for a person, when the tree is refused.
pub fn read_tree<W: Write>(
    reader: impl Read,
    opts: &TreeOptions,
    out: Option<(&mut Archive<W>, &str)>,
) -> Result<TreeIndex, String> {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let gzip = reader
        .fill_buf()
        .map_err(|e| format!("the skills tree could not be read: {e}"))?
        .starts_with(&[0x1f, 0x8b]);
    if gzip {
        walk(flate2::read::GzDecoder::new(reader), opts, out)
    } else {
        walk(reader, opts, out)
    }
}

fn walk<W: Write>(
    reader: impl Read,
    opts: &TreeOptions,
    mut out: Option<(&mut Archive<W>, &str)>,
) -> Result<TreeIndex, String> {
    let subpath = opts
        .subpath
        .as_deref()
        .map(|s| s.trim_matches('/'))
        .filter(|s| !s.is_empty() && *s != ".");
    let mut archive = tar::Archive::new(reader);
    let bad = |e: std::io::Error| format!("the skills tree is not a readable tar archive: {e}");
    let mut index = TreeIndex::default();
    let mut members = 0u64;
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        members += 1;
        if members > MAX_ARCHIVE_MEMBERS {
            return Err(format!(
                "the skills tree has more than {MAX_ARCHIVE_MEMBERS} entries, the most a source may hold"
            ));
        }
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader
        ) {
            continue;
        }
        let name = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let Some(path) = relative(&name, opts.strip)? else {
            continue;
        };
        if path.split('/').any(|c| c == ".git") {
            continue;
        }
        if !kind.is_dir() && !kind.is_file() {
            if opts.skip_special {
                continue;
            }
            return Err(format!(
                "'{path}' in the skills tree is a link or a special file; only files and directories can be staged"
            ));
        }
        if kind.is_dir() {
            if let Some((a, prefix)) = out.as_mut() {
                a.dir(&format!("{prefix}/{path}")).map_err(io)?;
            }
            continue;
        }
        let size = entry.header().size().map_err(bad)?;
        index.files += 1;
        index.bytes += size;
        if index.bytes > MAX_UNPACKED_BYTES {
            return Err(format!(
                "the skills tree holds more than {} MiB, the most a source may hold",
                MAX_UNPACKED_BYTES >> 20
            ));
        }
        let file_name = path.rsplit('/').next().unwrap_or(&path);
        let parent = path.rfind('/').map_or("", |i| &path[..i]);
        let is_skill = file_name == "SKILL.md" && under(parent, subpath).is_some();
        let is_docs = opts.docs_file.as_deref().map(|d| d.trim_matches('/')) == Some(path.as_str());
        // A file the index reads is read whole into memory only up to its cap; the rest
        // streams through.
        let keep = if is_skill {
            MAX_SKILL_MD_BYTES
        } else if is_docs {
            MAX_DOCS_BYTES
        } else {
            0
        };
        let mut head = Vec::new();
        if keep > 0 {
            (&mut entry)
                .take(keep as u64)
                .read_to_end(&mut head)
                .map_err(bad)?;
        }
        if let Some((a, prefix)) = out.as_mut() {
            let mode = entry.header().mode().unwrap_or(0o644) & 0o755 | 0o644;
            let rest = (&mut entry)
                .chain(std::io::repeat(0))
                .take(size - head.len() as u64);
            a.file_from(
                &format!("{prefix}/{path}"),
                size,
                mode,
                head.as_slice().chain(rest),
            )
            .map_err(io)?;
        } else {
            std::io::copy(&mut entry, &mut std::io::sink()).map_err(bad)?;
        }
        if is_skill {
            index.skills.push(FoundSkill {
                dir: under(parent, subpath).unwrap_or_default().to_owned(),
                skill_md: String::from_utf8_lossy(&head).into_owned(),
            });
        } else if is_docs {
            index.docs = Some(String::from_utf8_lossy(&head).into_owned());
        }
    }
    index.skills.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(index)
}

/// Indexes a directory on the control-plane host as [`read_tree`] indexes an archive of it
/// (`.git` left out, links refused as `Archive::copy_tree` refuses them).
pub fn index_dir(root: &std::path::Path, opts: &TreeOptions) -> Result<TreeIndex, String> {
    let subpath = opts
        .subpath
        .as_deref()
        .map(|s| s.trim_matches('/'))
        .filter(|s| !s.is_empty() && *s != ".");
    let docs = opts.docs_file.as_deref().map(|d| d.trim_matches('/'));
    let mut index = TreeIndex::default();
    let mut stack = vec![(root.to_path_buf(), String::new())];
    while let Some((dir, rel)) = stack.pop() {
        let entries =
            std::fs::read_dir(&dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        for e in entries {
            let e = e.map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ".git" {
                continue;
            }
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let meta = std::fs::symlink_metadata(e.path())
                .map_err(|e| format!("cannot read {path}: {e}"))?;
            if meta.is_dir() {
                stack.push((e.path(), path));
                continue;
            }
            if !meta.is_file() {
                return Err(format!(
                    "'{path}' in the skills tree is a link or a special file; only files and directories can be staged"
                ));
            }
            index.files += 1;
            index.bytes += meta.len();
            if index.files > MAX_ARCHIVE_MEMBERS || index.bytes > MAX_UNPACKED_BYTES {
                return Err(format!(
                    "the skills tree holds more than {MAX_ARCHIVE_MEMBERS} files or {} MiB, the most a source may hold",
                    MAX_UNPACKED_BYTES >> 20
                ));
            }
            let head = |cap: usize| -> Result<String, String> {
                let mut buf = Vec::new();
                std::fs::File::open(e.path())
                    .and_then(|f| f.take(cap as u64).read_to_end(&mut buf))
                    .map_err(|err| format!("cannot read {path}: {err}"))?;
                Ok(String::from_utf8_lossy(&buf).into_owned())
            };
            let parent = path.rfind('/').map_or("", |i| &path[..i]);
            if name == "SKILL.md" {
                if let Some(dir) = under(parent, subpath) {
                    index.skills.push(FoundSkill {
                        dir: dir.to_owned(),
                        skill_md: head(MAX_SKILL_MD_BYTES)?,
                    });
                }
            } else if docs == Some(path.as_str()) {
                index.docs = Some(head(MAX_DOCS_BYTES)?);
            }
        }
    }
    index.skills.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(index)
}

fn io(e: std::io::Error) -> String {
    format!("the skills tree could not be staged: {e}")
}

/// `dir` relative to `subpath` (`""` for the subpath itself), or `None` outside it.
fn under<'a>(dir: &'a str, subpath: Option<&str>) -> Option<&'a str> {
    match subpath {
        None => Some(dir),
        Some(s) if dir == s => Some(""),
        Some(s) => dir.strip_prefix(s).and_then(|r| r.strip_prefix('/')),
    }
}

/// The member's path without its first `strip` components and `.` parts; `None` for the root
/// (or a stripped prefix). Refuses names that could leave the root.
fn relative(name: &str, strip: usize) -> Result<Option<String>, String> {
    let mut parts = Vec::new();
    for (i, c) in name.split('/').enumerate() {
        if i < strip || c.is_empty() || c == "." {
            continue;
        }
        if c == ".." || c.contains('\0') {
            return Err(format!(
                "'{name}' in the skills tree leaves its root; nothing may"
            ));
        }
        parts.push(c);
    }
    if name.starts_with('/') && strip == 0 {
        return Err(format!("'{name}' in the skills tree is an absolute path"));
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tar(entries: &[(&str, &str)]) -> Vec<u8> {
        let files: Vec<(&str, Option<&str>)> =
            entries.iter().map(|(n, d)| (*n, Some(*d))).collect();
        crate::test_tar::tar_of(&files)
    }

    #[test]
    fn skills_under_the_subpath_are_found_and_docs_read() {
        let t = tar(&[
            ("CLAUDE.md", "# The repo"),
            ("skills/pdf/SKILL.md", "---\nname: pdf\n---"),
            ("skills/pdf/run.sh", "echo"),
            ("skills/data/csv/SKILL.md", "csv"),
            ("other/SKILL.md", "not a skill here"),
            (".git/config", "x"),
        ]);
        let opts = TreeOptions {
            subpath: Some("skills/".into()),
            docs_file: Some("CLAUDE.md".into()),
            ..Default::default()
        };
        let i = read_tree::<Vec<u8>>(t.as_slice(), &opts, None).unwrap();
        let dirs: Vec<&str> = i.skills.iter().map(|s| s.dir.as_str()).collect();
        assert_eq!(dirs, ["data/csv", "pdf"]);
        assert_eq!(i.docs.as_deref(), Some("# The repo"));
        assert_eq!(i.files, 5, "the .git file is not part of the tree");
    }

    #[test]
    fn a_repacked_tree_is_owned_by_the_sandbox_user_under_its_prefix() {
        let t = tar(&[("a/SKILL.md", "hello"), ("a/b/c.txt", "world")]);
        let mut out = Archive::into_writer(Vec::new());
        let i = read_tree(
            t.as_slice(),
            &TreeOptions::default(),
            Some((&mut out, "tmp/src")),
        )
        .unwrap();
        assert_eq!(i.skills.len(), 1);
        let bytes = out.into_inner().unwrap();
        let mut a = tar::Archive::new(bytes.as_slice());
        let mut names = Vec::new();
        for e in a.entries().unwrap() {
            let mut e = e.unwrap();
            assert_eq!(e.header().uid().unwrap(), crate::manifest::SANDBOX_UID);
            let mut s = String::new();
            e.read_to_string(&mut s).unwrap();
            names.push((e.path().unwrap().display().to_string(), s));
        }
        assert!(names.contains(&("tmp/src/a/SKILL.md".into(), "hello".into())));
        assert!(names.contains(&("tmp/src/a/b/c.txt".into(), "world".into())));
    }

    #[test]
    fn a_host_directory_is_indexed_like_its_archive() {
        let dir = std::env::temp_dir().join(format!("sa-skills-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("skills/pdf")).unwrap();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::write(dir.join("skills/pdf/SKILL.md"), "---\nname: pdf\n---").unwrap();
        std::fs::write(dir.join(".git/SKILL.md"), "no").unwrap();
        std::fs::write(dir.join("CLAUDE.md"), "docs").unwrap();
        let opts = TreeOptions {
            subpath: Some("skills".into()),
            docs_file: Some("CLAUDE.md".into()),
            ..Default::default()
        };
        let i = index_dir(&dir, &opts).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(i.skills.len(), 1);
        assert_eq!(i.skills[0].dir, "pdf");
        assert_eq!(i.docs.as_deref(), Some("docs"));
        assert_eq!(i.files, 2);
    }

    #[test]
    fn names_leaving_the_root_are_refused_and_engine_prefixes_stripped() {
        let t = tar(&[("src/x/SKILL.md", "s")]);
        let opts = TreeOptions {
            strip: 1,
            ..Default::default()
        };
        let i = read_tree::<Vec<u8>>(t.as_slice(), &opts, None).unwrap();
        assert_eq!(i.skills[0].dir, "x");
        assert!(relative("a/../../etc", 0).is_err());
        assert!(relative("/etc/passwd", 0).is_err());
    }
}
