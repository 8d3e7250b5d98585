//! Skill bundles: archives to push (plain tar, built member by member) and the calls that
//! register, push and read them.

use crate::TestApp;
use reqwest::multipart::{Form, Part};
use serde_json::Value;

/// A tar archive; names go into the header as given (the tar crate's builder refuses the
/// hostile ones).
pub fn tar(members: &[(&str, tar::EntryType, &str)]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for (name, kind, data) in members {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        h.set_entry_type(*kind);
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        if *kind == tar::EntryType::Symlink {
            h.set_link_name("../../etc").unwrap();
        }
        h.set_cksum();
        b.append(&h, data.as_bytes()).unwrap();
    }
    b.into_inner().unwrap()
}

pub const FILE: tar::EntryType = tar::EntryType::Regular;

/// A plain tar of regular files.
pub fn tar_of(files: &[(&str, &str)]) -> Vec<u8> {
    let members: Vec<(&str, tar::EntryType, &str)> =
        files.iter().map(|(n, d)| (*n, FILE, *d)).collect();
    tar(&members)
}

/// A tree with two skills and a README holding `extra`, as a plain tar.
pub fn skills_tree(extra: &str) -> Vec<u8> {
    tar(&[
        (
            "pdf/SKILL.md",
            FILE,
            "---\nname: pdf\ndescription: Fill PDFs.\n---\n",
        ),
        ("pdf/scripts/fill.py", FILE, "print('fill')"),
        ("csv/SKILL.md", FILE, "# csv"),
        ("README.md", FILE, extra),
    ])
}

pub async fn create(app: &TestApp, body: Value) -> (u16, Value) {
    let r = app
        .http
        .post(app.url("/api/skill-bundles"))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// `POST …/versions` as the published client sends it: one part `file`, `bundle.tar.gz`.
pub async fn push(app: &TestApp, slug: &str, bytes: Vec<u8>) -> (u16, Value) {
    let part = Part::bytes(bytes).file_name("bundle.tar.gz");
    let r = app
        .http
        .post(app.url(&format!("/api/skill-bundles/{slug}/versions")))
        .multipart(Form::new().part("file", part))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

pub async fn get(app: &TestApp, path: &str) -> (u16, Value) {
    let r = app.http.get(app.url(path)).send().await.unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}
