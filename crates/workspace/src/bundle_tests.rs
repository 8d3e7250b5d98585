use super::*;
use std::io::Write;

/// A tar archive built member by member; names are written into the header as given (the
/// tar crate's own builder refuses the hostile ones these tests need).
struct Tar(tar::Builder<Vec<u8>>);

impl Tar {
    fn new() -> Self {
        Self(tar::Builder::new(Vec::new()))
    }

    fn member(mut self, name: &str, kind: tar::EntryType, data: &[u8]) -> Self {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        if matches!(kind, tar::EntryType::Symlink | tar::EntryType::Link) {
            h.set_link_name("target").unwrap();
        }
        h.set_cksum();
        self.0.append(&h, data).unwrap();
        self
    }

    fn file(self, name: &str, data: &str) -> Self {
        self.member(name, tar::EntryType::Regular, data.as_bytes())
    }

    fn dir(self, name: &str) -> Self {
        self.member(name, tar::EntryType::Directory, b"")
    }

    fn bytes(self) -> Vec<u8> {
        self.0.into_inner().unwrap()
    }

    fn gzip(self) -> Vec<u8> {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&self.bytes()).unwrap();
        gz.finish().unwrap()
    }
}

fn refusal(bytes: &[u8]) -> String {
    inspect(bytes).expect_err("refused").0
}

fn tree() -> Tar {
    Tar::new()
        .dir("./")
        .dir("./pdf/")
        .file("./pdf/SKILL.md", "---\nname: pdf\n---\n")
        .file("./pdf/scripts/fill.py", "print(1)")
        .file("csv/SKILL.md", "# csv")
        .file("README.md", "hello")
}

#[test]
fn a_plain_tree_is_counted_and_its_skills_found_sorted() {
    let got = inspect(&tree().bytes()[..]).unwrap();
    assert_eq!(got.file_count, 4);
    assert_eq!(got.skills, vec!["csv".to_owned(), "pdf".to_owned()]);
    assert_eq!(got.unpacked_bytes, 18 + 8 + 5 + 5);
}

#[test]
fn gzip_is_told_by_content_and_reads_the_same() {
    let plain = inspect(&tree().bytes()[..]).unwrap();
    let gz = inspect(&tree().gzip()[..]).unwrap();
    assert_eq!(plain, gz);
}

#[test]
fn a_skill_at_the_root_is_named_dot() {
    let got = inspect(&Tar::new().file("SKILL.md", "x").bytes()[..]).unwrap();
    assert_eq!(got.skills, vec![".".to_owned()]);
}

#[test]
fn names_that_leave_the_root_are_refused_by_name() {
    for name in ["/etc/passwd", "../x", "a/../../x", "a/.."] {
        let msg = refusal(&tree().file(name, "x").bytes());
        assert!(msg.contains(&format!("{name:?}")), "{name}: {msg}");
    }
    assert!(refusal(&Tar::new().file("/abs", "x").bytes()).contains("absolute"));
    assert!(refusal(&Tar::new().file("a/../b", "x").bytes()).contains("'..'"));
}

#[test]
fn a_git_component_anywhere_is_refused() {
    for name in [".git/config", "skills/.git/HEAD", "x/.git"] {
        let msg = refusal(&Tar::new().file(name, "x").bytes());
        assert!(msg.contains(".git"), "{name}: {msg}");
    }
    let msg = refusal(&Tar::new().dir("a/.git/").bytes());
    assert!(msg.contains("nested repositories"), "{msg}");
}

#[test]
fn links_devices_and_fifos_are_refused() {
    for (kind, what) in [
        (tar::EntryType::Symlink, "a symbolic link"),
        (tar::EntryType::Link, "a hard link"),
        (tar::EntryType::Char, "a character device"),
        (tar::EntryType::Block, "a block device"),
        (tar::EntryType::Fifo, "a FIFO"),
    ] {
        let msg = refusal(&tree().member("pdf/odd", kind, b"").bytes());
        assert!(msg.contains(what) && msg.contains("\"pdf/odd\""), "{msg}");
    }
}

#[test]
fn a_member_under_a_file_cannot_be_unpacked_and_is_refused() {
    let msg = refusal(&Tar::new().file("a", "x").file("a/b", "y").bytes());
    assert!(msg.contains("made a file"), "{msg}");
    let msg = refusal(&Tar::new().file("a/b", "y").file("a", "x").bytes());
    assert!(msg.contains("already has a directory"), "{msg}");
    let msg = refusal(&Tar::new().file("a", "x").dir("a/").bytes());
    assert!(msg.contains("already has a file"), "{msg}");
}

#[test]
fn empty_zip_and_garbage_are_refused_with_what_to_push() {
    assert!(refusal(b"").contains("empty"));
    assert!(refusal(&Tar::new().dir("a/").bytes()).contains("no files"));
    assert!(refusal(b"PK\x03\x04rest").contains("zip"));
    assert!(refusal(&[7u8; 2048]).contains("not a readable tar"));
    let mut truncated = tree().gzip();
    truncated.truncate(truncated.len() / 2);
    assert!(refusal(&truncated).contains("not a readable tar"));
}

#[test]
fn a_pax_global_header_is_metadata_not_a_member() {
    let got = inspect(
        &Tar::new()
            .member("pax_global_header", tar::EntryType::XGlobalHeader, b"")
            .file("s/SKILL.md", "x")
            .bytes()[..],
    )
    .unwrap();
    assert_eq!(got.file_count, 1);
}

#[test]
fn more_members_than_the_limit_are_refused_naming_it() {
    let mut t = Tar::new();
    for i in 0..=MAX_ARCHIVE_MEMBERS {
        t = t.dir(&format!("d{i}/"));
    }
    let msg = refusal(&t.bytes());
    assert!(msg.contains("50000"), "{msg}");
}
