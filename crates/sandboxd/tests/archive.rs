//! A path packed as a tar stream (`GET /v1/archive?path=`), with the daemon in-process on one
//! end of a socket pair and the client on the other: entries named as the Engine names them,
//! symlinks and hard links kept, a file as one entry, a missing path refused before any byte,
//! and an archive that extracts back to the tree it came from.

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use sandboxd::client::Client;
use sandboxd::proto::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

async fn daemon() -> Client {
    let daemon = Arc::new(sandboxd::daemon::Daemon::default());
    let (ours, theirs) = tokio::net::UnixStream::pair().unwrap();
    tokio::spawn(sandboxd::daemon::serve_connection(daemon, theirs));
    let (client, driver) = Client::handshake(ours).await.unwrap();
    tokio::spawn(driver);
    client
}

async fn archive_of(client: &Client, path: &Path) -> Bytes {
    let chunks: Vec<Bytes> = client
        .get_archive(&path.display().to_string())
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    Bytes::from(chunks.concat())
}

/// Each entry as (name, kind, mode, contents or link target).
fn entries(tar: &[u8]) -> Vec<(String, tar::EntryType, u32, Vec<u8>)> {
    use std::io::Read;
    let mut archive = tar::Archive::new(tar);
    archive
        .entries()
        .unwrap()
        .map(|e| {
            let mut e = e.unwrap();
            let name = String::from_utf8(e.path_bytes().into_owned()).unwrap();
            let kind = e.header().entry_type();
            let mode = e.header().mode().unwrap();
            let mut data = Vec::new();
            match e.link_name_bytes() {
                Some(target) => data.extend_from_slice(&target),
                None => {
                    e.read_to_end(&mut data).unwrap();
                }
            }
            (name, kind, mode, data)
        })
        .collect()
}

/// `ws/` holding a file, a big file, a subdirectory, an empty directory, a symlink, a
/// dangling symlink and a second name of the first file.
fn tree(root: &Path) -> std::path::PathBuf {
    let ws = root.join("ws");
    std::fs::create_dir_all(ws.join("sub")).unwrap();
    std::fs::create_dir(ws.join("empty")).unwrap();
    std::fs::write(ws.join("a.txt"), b"alpha\n").unwrap();
    std::fs::write(ws.join("sub/b.sh"), b"#!/bin/sh\n").unwrap();
    std::fs::set_permissions(ws.join("sub/b.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(ws.join("big.bin"), &big).unwrap();
    std::os::unix::fs::symlink("a.txt", ws.join("link")).unwrap();
    std::os::unix::fs::symlink("/no/such/target", ws.join("dangling")).unwrap();
    std::fs::hard_link(ws.join("a.txt"), ws.join("hard")).unwrap();
    ws
}

#[tokio::test]
async fn a_directory_is_packed_under_its_own_name_with_links_kept() {
    use tar::EntryType as T;
    let client = daemon().await;
    let dir = tempfile::tempdir().unwrap();
    let ws = tree(dir.path());
    let tar = archive_of(&client, &ws).await;
    let got = entries(&tar);
    let names: Vec<(&str, T)> = got.iter().map(|(n, k, ..)| (n.as_str(), *k)).collect();
    assert_eq!(
        names,
        [
            ("ws/", T::Directory),
            ("ws/a.txt", T::Regular),
            ("ws/big.bin", T::Regular),
            ("ws/dangling", T::Symlink),
            ("ws/empty/", T::Directory),
            ("ws/hard", T::Link),
            ("ws/link", T::Symlink),
            ("ws/sub/", T::Directory),
            ("ws/sub/b.sh", T::Regular),
        ]
    );
    let data = |name: &str| &got.iter().find(|e| e.0 == name).unwrap().3;
    assert_eq!(data("ws/a.txt"), b"alpha\n");
    assert_eq!(
        data("ws/big.bin"),
        &std::fs::read(ws.join("big.bin")).unwrap()
    );
    assert_eq!(data("ws/link"), b"a.txt");
    assert_eq!(data("ws/dangling"), b"/no/such/target");
    assert_eq!(data("ws/hard"), b"ws/a.txt");
    let mode = |name: &str| got.iter().find(|e| e.0 == name).unwrap().2;
    assert_eq!(mode("ws/sub/b.sh"), 0o750);
}

#[tokio::test]
async fn a_packed_tree_extracts_back_to_the_same_tree() {
    let client = daemon().await;
    let dir = tempfile::tempdir().unwrap();
    let ws = tree(dir.path());
    let tar = archive_of(&client, &ws).await;
    let copy = tempfile::tempdir().unwrap();
    let chunks: Vec<std::io::Result<Bytes>> = tar
        .chunks(10_000)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    client
        .put_archive(
            &copy.path().display().to_string(),
            futures::stream::iter(chunks).boxed(),
        )
        .await
        .unwrap();
    let back = copy.path().join("ws");
    for file in ["a.txt", "big.bin", "sub/b.sh", "hard"] {
        assert_eq!(
            std::fs::read(back.join(file)).unwrap(),
            std::fs::read(ws.join(file)).unwrap(),
            "{file}"
        );
    }
    assert_eq!(
        std::fs::read_link(back.join("link")).unwrap(),
        Path::new("a.txt")
    );
    assert!(back.join("empty").is_dir());
}

#[tokio::test]
async fn a_file_or_a_symlink_is_one_entry_named_after_it() {
    let client = daemon().await;
    let dir = tempfile::tempdir().unwrap();
    let ws = tree(dir.path());
    let file = entries(&archive_of(&client, &ws.join("sub/b.sh")).await);
    assert_eq!(file.len(), 1);
    assert_eq!(
        (file[0].0.as_str(), file[0].1, &file[0].3[..]),
        ("b.sh", tar::EntryType::Regular, &b"#!/bin/sh\n"[..])
    );
    // The link itself, not what it points to: how a caller follows a link step by step.
    let link = entries(&archive_of(&client, &ws.join("link")).await);
    assert_eq!(link.len(), 1);
    assert_eq!(
        (link[0].0.as_str(), link[0].1, &link[0].3[..]),
        ("link", tar::EntryType::Symlink, &b"a.txt"[..])
    );
}

#[tokio::test]
async fn a_missing_path_is_not_found_before_any_byte() {
    let client = daemon().await;
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope").display().to_string();
    let e = client.get_archive(&missing).await.err().unwrap();
    assert_eq!(e.kind(), Some(ErrorKind::NotFound), "{e}");
    let e = client.get_archive("relative/path").await.err().unwrap();
    assert_eq!(e.kind(), Some(ErrorKind::Invalid), "{e}");
}
