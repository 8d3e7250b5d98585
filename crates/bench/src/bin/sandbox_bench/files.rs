//! File transfers (`--parts files`): a 1 KB and a 10 MB file written into a running sandbox
//! and read back, through the workspace endpoints (`POST …/files`, `GET …/files/content`) and
//! the absolute-path ones (`PUT`/`GET …/sandbox-files`), beside the raw thing a Docker-only
//! control plane would do: the Engine's archive API (`PUT`/`GET /containers/{id}/archive`,
//! a tar of the one file) straight on bollard, to a container of the same image.
//!
//! Each read is checked byte for byte against what was written, outside the timed region.

use crate::report::{Part, Row};
use crate::{interleaved, ours, raw, Args};
use anyhow::{bail, Context};
use bollard::query_parameters::{DownloadFromContainerOptions, UploadToContainerOptions};
use bollard::{body_full, Docker};
use bytes::Bytes;
use futures::StreamExt;
use sandbox_agents_testkit::TestApp;
use serde_json::json;
use std::io::Read;
use std::time::Instant;

/// The sizes measured.
const SIZES: [(&str, usize); 2] = [("1 KB", 1024), ("10 MB", 10 * 1024 * 1024)];

/// Bytes that are not all alike (a checker that only counts would pass zeros).
fn payload(size: usize) -> Bytes {
    Bytes::from(
        (0..size)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect::<Vec<_>>(),
    )
}

/// A tar holding `name` (uid 1000, 0644) with `data`.
fn tar_of(name: &str, data: &[u8]) -> anyhow::Result<Bytes> {
    let mut b = tar::Builder::new(Vec::new());
    let mut h = tar::Header::new_gnu();
    h.set_size(data.len() as u64);
    h.set_mode(0o644);
    h.set_uid(1000);
    h.set_gid(1000);
    h.set_cksum();
    b.append_data(&mut h, name, data)?;
    Ok(Bytes::from(b.into_inner()?))
}

async fn raw_write(docker: &Docker, id: &str, tar: Bytes) -> anyhow::Result<()> {
    docker
        .upload_to_container(
            id,
            Some(UploadToContainerOptions {
                path: sandbox_agents_sandbox::WORKDIR.into(),
                ..Default::default()
            }),
            body_full(tar),
        )
        .await
        .context("PUT archive")?;
    Ok(())
}

async fn raw_read(docker: &Docker, id: &str, path: &str) -> anyhow::Result<Vec<u8>> {
    let mut stream = docker.download_from_container(
        id,
        Some(DownloadFromContainerOptions {
            path: path.to_owned(),
        }),
    );
    let mut tar = Vec::new();
    while let Some(chunk) = stream.next().await {
        tar.extend_from_slice(&chunk.context("GET archive")?);
    }
    let mut archive = tar::Archive::new(tar.as_slice());
    let mut entry = archive.entries()?.next().context("an empty archive")??;
    let mut data = Vec::new();
    entry.read_to_end(&mut data)?;
    Ok(data)
}

async fn ours_upload(app: &TestApp, id: &str, name: &str, data: Bytes) -> anyhow::Result<()> {
    let part = reqwest::multipart::Part::stream(data)
        .file_name(name.to_owned())
        .mime_str("application/octet-stream")?;
    let r = app
        .http
        .post(app.url(&format!("/api/sessions/{id}/files")))
        .query(&[("path", name)])
        .multipart(reqwest::multipart::Form::new().part("file", part))
        .send()
        .await?;
    if r.status() != 201 {
        bail!(
            "upload: {} {}",
            r.status(),
            r.text().await.unwrap_or_default()
        );
    }
    Ok(())
}

async fn ours_get(app: &TestApp, url: String, query: (&str, &str)) -> anyhow::Result<Bytes> {
    let r = app.http.get(url).query(&[query]).send().await?;
    if r.status() != 200 {
        bail!(
            "read: {} {}",
            r.status(),
            r.text().await.unwrap_or_default()
        );
    }
    Ok(r.bytes().await?)
}

async fn ours_put(app: &TestApp, id: &str, path: &str, data: Bytes) -> anyhow::Result<()> {
    let r = app
        .http
        .put(app.url(&format!("/api/sessions/{id}/sandbox-files")))
        .query(&[("path", path)])
        .body(data)
        .send()
        .await?;
    if !r.status().is_success() {
        bail!("put: {} {}", r.status(), r.text().await.unwrap_or_default());
    }
    Ok(())
}

/// One part per size: writes and reads, ours and raw.
pub async fn parts(
    args: &Args,
    app: &TestApp,
    docker: &Docker,
    tar: &Bytes,
) -> anyhow::Result<Vec<Part>> {
    let agent =
        ours::create_agent(app, json!({"slug": "bench-files", "name": "bench-files"})).await?;
    let (id, _, _) = ours::create_until_running(app, &agent).await?;
    let settings = app.sessions.settings();
    let raw_id = raw::create_start_upload(docker, &settings.default_image, &settings.limits, tar)
        .await
        .context("starting the raw container")?;
    let result = async {
        let mut out = Vec::new();
        for (label, size) in SIZES {
            let data = payload(size);
            let name = format!("bench-{size}.bin");
            let abs = format!("/workspace/{name}");
            let raw_tar = tar_of(&name, &data)?;
            let mut rows = vec![
                Row::new("ours: POST /api/sessions/{id}/files (multipart upload)", "HTTP, confinement check through the daemon, the bytes streamed to the daemon, user.file event"),
                Row::new("ours: PUT /api/sessions/{id}/sandbox-files", "HTTP, the bytes streamed to the daemon"),
                Row::new("raw bollard: PUT archive (a tar of the file)", "what a Docker-only path does"),
                Row::new("ours: GET /api/sessions/{id}/files/content", "HTTP, confinement check through the daemon, the bytes streamed from the daemon"),
                Row::new("ours: GET /api/sessions/{id}/sandbox-files", "HTTP, stat + read through the daemon"),
                Row::new("raw bollard: GET archive (a tar of the file), untarred", "what a Docker-only path does"),
            ];
            let checked = std::cell::Cell::new(0usize);
            interleaved(args, &mut rows, |v| {
                let (data, name, abs, raw_tar, raw_id, id) =
                    (data.clone(), &name, &abs, raw_tar.clone(), &raw_id, &id);
                let checked = &checked;
                async move {
                    let t0 = Instant::now();
                    let read = match v {
                        0 => {
                            ours_upload(app, id, name, data.clone()).await?;
                            None
                        }
                        1 => {
                            ours_put(app, id, abs, data.clone()).await?;
                            None
                        }
                        2 => {
                            raw_write(docker, raw_id, raw_tar).await?;
                            None
                        }
                        3 => Some(ours_get(app, app.url(&format!("/api/sessions/{id}/files/content")), ("path", name.as_str())).await?.to_vec()),
                        4 => Some(ours_get(app, app.url(&format!("/api/sessions/{id}/sandbox-files")), ("path", abs.as_str())).await?.to_vec()),
                        _ => Some(raw_read(docker, raw_id, abs).await?),
                    };
                    let elapsed = t0.elapsed();
                    if let Some(bytes) = read {
                        anyhow::ensure!(bytes == data, "variant {v} read back {} bytes that differ from the {} written", bytes.len(), data.len());
                        checked.set(checked.get() + 1);
                    }
                    Ok(elapsed)
                }
            })
            .await?;
            let reads = rows.split_off(3);
            let small = label == "1 KB";
            out.push(Part {
                title: if small { "Write a 1 KB file" } else { "Write a 10 MB file" },
                rows,
                notes: String::new(),
            });
            out.push(Part {
                title: if small { "Read a 1 KB file" } else { "Read a 10 MB file" },
                rows: reads,
                notes: format!(
                    "Every read ({} of them) was compared byte for byte with what was written.\n",
                    checked.get()
                ),
            });
        }
        anyhow::Ok(out)
    }
    .await;
    let deleted = ours::delete_session(app, &id).await;
    raw::remove(docker, &raw_id).await?;
    deleted?;
    result
}
