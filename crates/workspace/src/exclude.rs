//! A workspace archive without some of its paths: what stops and snapshots store leaves out
//! mounted buckets (they are staged again at the next boot, from the bucket itself).

use crate::archive::{is_ancestor, workspace_name};
use crate::stream::{blocking_reader, pipe};
use crate::ByteStream;
use std::io::{Read, Write};

/// `archive` (a sandbox's `get_archive` of the workspace: entries `workspace/...`) rewritten
/// on a blocking thread without the entries at or under the workspace-relative paths of
/// `excluded`, streamed. A read error ends the stream with an error, never with a cut archive
/// that looks whole.
pub fn without_paths(archive: ByteStream, excluded: Vec<String>) -> ByteStream {
    if excluded.is_empty() {
        return archive;
    }
    let (writer, out) = pipe();
    let handle = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        let mut tar = tar::Builder::new(writer);
        match copy_without(blocking_reader(archive, handle), &mut tar, &excluded) {
            Ok(()) => match tar.into_inner() {
                Ok(mut w) => {
                    let _ = w.flush();
                }
                Err(e) => tracing::debug!(error = %e, "finishing a filtered archive"),
            },
            Err(e) => {
                if let Ok(w) = tar.into_inner() {
                    w.fail(e);
                }
            }
        }
    });
    out
}

fn copy_without<W: Write>(
    reader: impl Read,
    tar: &mut tar::Builder<W>,
    excluded: &[String],
) -> std::io::Result<()> {
    let mut a = tar::Archive::new(reader);
    for e in a.entries()? {
        let mut e = e?;
        let raw = e.path_bytes().into_owned();
        if let Some(rel) = workspace_name(&raw) {
            if excluded.iter().any(|x| *x == rel || is_ancestor(x, &rel)) {
                continue;
            }
        }
        let mut h = e.header().clone();
        let path = e.path()?.into_owned();
        match h.entry_type() {
            tar::EntryType::Symlink | tar::EntryType::Link => {
                let target = e.link_name()?.map(|t| t.into_owned()).unwrap_or_default();
                tar.append_link(&mut h, &path, &target)?;
            }
            _ => tar.append_data(&mut h, &path, &mut e)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::{StreamExt, TryStreamExt};

    #[tokio::test]
    async fn mounted_paths_and_what_is_under_them_are_left_out() {
        let tar = bytes::Bytes::from(crate::test_tar::tar_of(&[
            ("workspace/", None),
            ("workspace/keep.txt", Some("k")),
            ("workspace/data/", None),
            ("workspace/data/in/", None),
            ("workspace/data/in/x.txt", Some("x")),
            ("workspace/data/inner.txt", Some("i")),
        ]));
        let input = futures::stream::iter([Ok::<_, std::io::Error>(tar)]).boxed();
        let out: Vec<bytes::Bytes> = without_paths(input, vec!["data/in".into()])
            .try_collect()
            .await
            .unwrap();
        let out = out.concat();
        let mut a = tar::Archive::new(out.as_slice());
        let names: Vec<String> = a
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(
            names,
            [
                "workspace/",
                "workspace/keep.txt",
                "workspace/data/",
                "workspace/data/inner.txt"
            ]
        );
    }
}
