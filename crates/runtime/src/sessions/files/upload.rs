//! Building an upload: the one-file tar put into the sandbox, and the file names allowed.

use bytes::Bytes;
use std::collections::VecDeque;
use std::io::Read;
use tar::EntryType;

/// A `Read` over a list of chunks, for building the upload's tar without joining them first.
struct Chunks(VecDeque<Bytes>);

impl Read for Chunks {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while let Some(front) = self.0.front_mut() {
            if front.is_empty() {
                self.0.pop_front();
                continue;
            }
            let n = front.len().min(buf.len());
            buf[..n].copy_from_slice(&front[..n]);
            bytes::Buf::advance(front, n);
            return Ok(n);
        }
        Ok(0)
    }
}

/// A tar with one regular file, `name` (relative), mode 0644.
pub(super) fn single_file_tar(
    name: &str,
    size: u64,
    data: VecDeque<Bytes>,
) -> std::io::Result<Vec<u8>> {
    let mut b = tar::Builder::new(Vec::with_capacity(size as usize + 4096 + name.len()));
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(EntryType::Regular);
    h.set_mode(0o644);
    h.set_size(size);
    h.set_mtime(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    );
    b.append_data(&mut h, name, Chunks(data))?;
    b.into_inner()
}

/// Is `name` usable as a file name on its own?
pub(super) fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains('/') && !name.contains('\0')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::files::archive::is_ancestor;

    #[test]
    fn upload_tars_hold_one_file() {
        let data: VecDeque<Bytes> = [Bytes::from_static(b"ab"), Bytes::from_static(b"cde")].into();
        let tar = single_file_tar("a/b.txt", 5, data).unwrap();
        let mut a = tar::Archive::new(&tar[..]);
        let mut e = a.entries().unwrap().next().unwrap().unwrap();
        let mut s = String::new();
        e.read_to_string(&mut s).unwrap();
        assert_eq!((s.as_str(), e.header().mode().unwrap()), ("abcde", 0o644));
        assert!(is_ancestor("", "a") && is_ancestor("a", "a/b") && !is_ancestor("a", "ab"));
        assert!(plain_name("x.txt") && !plain_name("..") && !plain_name("a/b"));
    }
}
