//! Listing a live workspace: parsing `find` output, and `ls -l` style permissions.

use sandbox_agents_domain::session::WorkspaceEntry;

/// `ls -l` style permissions: the type letter, then `rwx` three times with set-id and sticky
/// bits shown as `s`/`S` and `t`/`T`.
pub fn ls_permissions(kind: char, mode: u32) -> String {
    let mut s = String::with_capacity(10);
    s.push(kind);
    for (shift, special, (lower, upper)) in [
        (6, 0o4000, ('s', 'S')),
        (3, 0o2000, ('s', 'S')),
        (0, 0o1000, ('t', 'T')),
    ] {
        let bits = (mode >> shift) & 7;
        s.push(if bits & 4 != 0 { 'r' } else { '-' });
        s.push(if bits & 2 != 0 { 'w' } else { '-' });
        s.push(match (bits & 1 != 0, mode & special != 0) {
            (true, true) => lower,
            (false, true) => upper,
            (true, false) => 'x',
            (false, false) => '-',
        });
    }
    s
}

/// `rel/name`, or `name` at the root.
pub fn child(rel: &str, name: &str) -> String {
    if rel.is_empty() {
        name.to_owned()
    } else {
        format!("{rel}/{name}")
    }
}

/// Parses `find -printf '%y\t%s\t%M\t%u\t%g\t%P\0'` output; `rel` is the listed path.
pub fn parse_find(out: &[u8], rel: &str) -> Vec<WorkspaceEntry> {
    let mut entries: Vec<WorkspaceEntry> = out
        .split(|b| *b == 0)
        .filter(|r| !r.is_empty())
        .filter_map(|record| {
            let record = String::from_utf8_lossy(record);
            let mut f = record.splitn(6, '\t');
            let (y, size, perms, owner, group, name) = (
                f.next()?,
                f.next()?,
                f.next()?,
                f.next()?,
                f.next()?,
                f.next()?,
            );
            Some(WorkspaceEntry {
                path: if name.is_empty() {
                    if rel.is_empty() {
                        ".".into()
                    } else {
                        rel.to_owned()
                    }
                } else {
                    child(rel, name)
                },
                kind: match y {
                    "f" => "file",
                    "d" => "directory",
                    "l" => "symlink",
                    _ => "other",
                }
                .into(),
                size: size.parse().unwrap_or(0),
                permissions: perms.into(),
                owner: owner.into(),
                group: group.into(),
            })
        })
        .collect();
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    entries
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permissions_are_ls_style() {
        assert_eq!(ls_permissions('-', 0o644), "-rw-r--r--");
        assert_eq!(ls_permissions('d', 0o755), "drwxr-xr-x");
        assert_eq!(ls_permissions('-', 0o4755), "-rwsr-xr-x");
        assert_eq!(ls_permissions('d', 0o1777), "drwxrwxrwt");
        assert_eq!(ls_permissions('-', 0o2640), "-rw-r-S---");
    }

    #[test]
    fn find_output_is_parsed_and_sorted() {
        let out =
            b"f\t3\t-rw-r--r--\tsandbox\tsandbox\tb\tc\0d\t4096\tdrwxr-xr-x\tsandbox\tsandbox\ta\0";
        let got = parse_find(out, "out");
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].path.as_str(), got[0].kind.as_str()),
            ("out/a", "directory")
        );
        assert_eq!((got[1].path.as_str(), got[1].size), ("out/b\tc", 3));
        let one = parse_find(b"f\t3\t-rw-r--r--\tsandbox\tsandbox\t\0", "out/x.md");
        assert_eq!(one[0].path, "out/x.md");
    }
}
