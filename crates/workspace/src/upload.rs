//! The tar framing around one uploaded file streamed into the sandbox, and the file names
//! allowed. The file's bytes are never held in memory: the framing is a header block (with
//! a directory entry for each parent, so none is created by the backend as root), the bytes
//! as they stream, then padding and the end-of-archive blocks.

use crate::manifest::SANDBOX_UID;
use sandbox_agents_sandbox::path::parent_dirs;
use std::path::{Component, Path};
use tar::EntryType;

const BLOCK: u64 = 512;

fn header(kind: EntryType, mode: u32, size: u64, mtime: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_size(size);
    h.set_mtime(mtime);
    // The sandbox user's group has its number (as in every archive of ours, `manifest`).
    h.set_uid(SANDBOX_UID);
    h.set_gid(SANDBOX_UID);
    h
}

/// Everything of the archive before the file's bytes: its parent directories (0755) and its
/// own header (a regular file of `size` bytes, 0644), all owned by the sandbox user. `entry`
/// is relative and has no `.`/`..` components.
pub fn upload_head(entry: &str, size: u64) -> std::io::Result<Vec<u8>> {
    let path = Path::new(entry);
    if entry.is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("'{entry}' is not a plain relative path"),
        ));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let mut b = tar::Builder::new(Vec::new());
    for dir in parent_dirs(path) {
        b.append_data(
            &mut header(EntryType::Directory, 0o755, 0, now),
            dir,
            std::io::empty(),
        )?;
    }
    // The data is not appended here: the builder writes the header (and a long-name entry
    // when the path needs one) and no bytes for an empty reader.
    b.append_data(
        &mut header(EntryType::Regular, 0o644, size, now),
        path,
        std::io::empty(),
    )?;
    let head = b.get_ref().clone();
    Ok(head)
}

/// Everything after the file's `size` bytes: padding to a block, and the two zero blocks that
/// end an archive.
pub fn upload_tail(size: u64) -> Vec<u8> {
    let pad = (BLOCK - size % BLOCK) % BLOCK;
    vec![0u8; (pad + 2 * BLOCK) as usize]
}

/// Is `name` usable as a file name on its own?
pub fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::archive::is_ancestor;
    use std::io::Read;

    #[test]
    fn the_framing_around_the_bytes_is_a_tar_of_one_file_owned_by_the_sandbox_user() {
        let long = format!("{}/b.txt", "d".repeat(150));
        for (entry, data) in [
            ("a/b.txt", &b"abcde"[..]),
            (long.as_str(), &[7u8; 1024][..]),
        ] {
            let mut tar = upload_head(entry, data.len() as u64).unwrap();
            tar.extend_from_slice(data);
            tar.extend(upload_tail(data.len() as u64));
            let mut a = tar::Archive::new(&tar[..]);
            let mut entries = a.entries().unwrap();
            let dir = entries.next().unwrap().unwrap();
            assert_eq!(dir.header().entry_type(), EntryType::Directory);
            assert_eq!(dir.header().uid().unwrap(), SANDBOX_UID);
            let mut e = entries.next().unwrap().unwrap();
            assert_eq!(e.path().unwrap().to_str().unwrap(), entry);
            let mut got = Vec::new();
            e.read_to_end(&mut got).unwrap();
            assert_eq!(got, data);
            assert_eq!(e.header().mode().unwrap(), 0o644);
            assert_eq!(e.header().gid().unwrap(), SANDBOX_UID);
            drop(e);
            assert!(entries.next().is_none());
        }
        assert!(upload_head("../x", 1).is_err() && upload_head("/abs", 1).is_err());
        assert!(is_ancestor("", "a") && is_ancestor("a", "a/b") && !is_ancestor("a", "ab"));
        assert!(plain_name("x.txt") && !plain_name("..") && !plain_name("a/b"));
    }
}
