//! Image builds: one per digest at a time across every process (the build's advisory lock,
//! held on a connection of the builder's own that dies with it), at most
//! `max_concurrent_builds` at once in a process, each finishing `ready` or `failed` with its
//! log in the blob store. A build whose builder died is `building` with nobody holding its
//! lock; [`Environments::resume_builds`] (at start and with every sweep) takes it over, so
//! none stays `building`. When one finishes, the sessions that waited for it boot.

use crate::dockerfile::{self, MISSING_MARKER};
use crate::Environments;
use bytes::Bytes;
use sandbox_agents_domain::state::BuildStatus;
use sandbox_agents_domain::text::strip_ansi;
use sandbox_agents_errors::{internal_reference, Result};
use sandbox_agents_sandbox::{ImageBuild, LABEL_ENVIRONMENT_DIGEST};
use sandbox_agents_store::environments::{self, BuildRecord};
use sqlx::Connection;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// Most bytes of a build's log that are kept.
const MAX_LOG: usize = 4 * 1024 * 1024;
/// Lines of output an error quotes.
const TAIL_LINES: usize = 12;
/// Longest error message.
const MAX_ERROR: usize = 2_000;
/// Attempts of a build whose images vanished under it (see [`vanished_image`]), or whose
/// request the Engine failed.
const BUILD_ATTEMPTS: usize = 3;

/// The Engine's words when an image it was using (a cached layer) was removed mid-build, e.g.
/// `failed to get digest sha256:…: open /var/lib/docker/image/…: no such file or directory`.
fn vanished_image(engine: &str) -> bool {
    engine.contains("failed to get digest") || engine.contains("No such image")
}

/// What a build's output has shown so far.
#[derive(Default)]
pub(crate) struct Progress {
    text: String,
    truncated: bool,
    /// The manager whose step runs (from the `Step n/m : RUN : manager=...` lines).
    manager: Option<String>,
    /// A step's own explanation (a missing tool).
    missing: Option<String>,
    tail: VecDeque<String>,
}

/// The Engine's words for a failed step, shortened: the command it quotes is in the log.
fn engine_summary(engine: &str) -> String {
    match engine.rsplit_once("returned a non-zero code: ") {
        Some((_, code)) => format!("exit code {}", code.trim()),
        None => engine.to_owned(),
    }
}

impl Progress {
    fn line(&mut self, line: &str) {
        let line = strip_ansi(line);
        let line = line.as_str();
        if self.text.len() + line.len() < MAX_LOG {
            self.text.push_str(line);
            self.text.push('\n');
        } else if !self.truncated {
            self.truncated = true;
            self.text
                .push_str("[the rest of the log was cut: it is longer than 4 MiB]\n");
        }
        if line.starts_with("Step ") {
            self.manager = dockerfile::step_manager(line).map(str::to_owned);
            self.tail.clear();
            return;
        }
        // A step's own words start its output line (the Engine's echo of the failed
        // command quotes them too, mid-line).
        if let Some(why) = line.trim_start().strip_prefix(MISSING_MARKER) {
            self.missing = Some(why.trim().to_owned());
        }
        let trimmed = line.trim();
        let noise = trimmed.is_empty()
            || trimmed.starts_with("---> ")
            || trimmed.starts_with("Removing intermediate container")
            || trimmed.starts_with("The command '");
        if !noise {
            if self.tail.len() == TAIL_LINES {
                self.tail.pop_front();
            }
            self.tail.push_back(trimmed.to_owned());
        }
    }

    /// The failure in words: which manager failed, and why.
    fn error(&self, base: &str, engine: &str) -> String {
        let msg = match (&self.manager, &self.missing) {
            (Some(m), Some(why)) => format!("{m}: {why}"),
            (Some(m), None) => {
                let tail: Vec<&str> = self.tail.iter().map(String::as_str).collect();
                format!(
                    "{m} failed ({}): {}",
                    engine_summary(engine),
                    tail.join(" | ")
                )
            }
            (None, _) => format!("the base image {base} could not be used: {engine}"),
        };
        if msg.len() > MAX_ERROR {
            let mut cut = MAX_ERROR;
            while !msg.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}…", &msg[..cut])
        } else {
            msg
        }
    }
}

/// Takes a digest out of the in-flight set when dropped.
struct InFlight<'a>(&'a Environments, &'a str);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0
            .inner
            .inflight
            .lock()
            .expect("inflight")
            .remove(self.1);
    }
}

impl Environments {
    /// Builds `digest` in the background, once a permit is free.
    pub(crate) fn spawn_build(&self, digest: String) {
        if !self
            .inner
            .inflight
            .lock()
            .expect("inflight")
            .insert(digest.clone())
        {
            return;
        }
        let rt = self.clone();
        self.inner.tasks.spawn(async move {
            if let Err(e) = rt.build(&digest).await {
                tracing::error!(build = %digest, error = %e, "an image build could not record its outcome; the sweep takes it over");
            }
        });
    }

    /// Takes over every build still `building` whose builder is gone (or never started):
    /// run at start and by every sweep. Builds that another live process holds are skipped
    /// (their lock is taken).
    #[tracing::instrument(skip_all)]
    pub async fn resume_builds(&self) -> Result<usize> {
        let digests = environments::building(&self.inner.db).await?;
        let n = digests.len();
        for digest in digests {
            self.spawn_build(digest);
        }
        Ok(n)
    }

    /// Waits until every build this process started has ended (tests; shutdown).
    pub async fn idle(&self) {
        self.inner.tasks.close();
        self.inner.tasks.wait().await;
        self.inner.tasks.reopen();
    }

    /// Deletes builds nothing needs any more and removes their images and logs.
    pub async fn collect_unused(&self) -> Result<u64> {
        let n = environments::collect_unused(&self.inner.db).await?;
        if n > 0 {
            tracing::info!(
                builds = n,
                "removing images no environment or session needs"
            );
            self.inner.sessions.collect_garbage().await?;
        }
        Ok(n)
    }

    pub(crate) fn spawn_collect(&self) {
        let rt = self.clone();
        self.inner.tasks.spawn(async move {
            if let Err(e) = rt.collect_unused().await {
                tracing::warn!(error = %e, "collecting unused environment images failed; the sweep retries");
            }
        });
    }

    /// The periodic sweep: resume orphaned builds, collect unused images. Ends at shutdown.
    pub fn spawn_workers(&self) {
        let rt = self.clone();
        tokio::spawn(async move {
            let shutdown = rt.inner.shutdown.clone();
            loop {
                if let Err(e) = rt.resume_builds().await {
                    tracing::warn!(error = %e, "resuming image builds failed; will retry");
                }
                if let Err(e) = rt.collect_unused().await {
                    tracing::warn!(error = %e, "collecting unused images failed; will retry");
                }
                tokio::select! {
                    _ = tokio::time::sleep(rt.inner.settings.sweep_interval) => {}
                    _ = shutdown.cancelled() => break,
                }
            }
        });
    }

    /// One build of `digest`, if it is still `building` and nobody else builds it.
    #[tracing::instrument(skip_all, fields(build = %digest))]
    async fn build(&self, digest: &str) -> Result<()> {
        let st = &self.inner;
        // Out of flight however this ends (early returns included).
        let in_flight = InFlight(self, digest);
        let _permit = tokio::select! {
            p = st.permits.clone().acquire_owned() => p.map_err(|e| anyhow::anyhow!("{e}"))?,
            _ = st.shutdown.cancelled() => return Ok(()),
        };
        // A connection of this build's own: the lock lives exactly as long as it does, so a
        // builder that dies (or is cancelled at shutdown) lets the next process take over.
        let mut conn = st.db.acquire().await?.detach();
        if !environments::try_lock_build(&mut conn, digest).await? {
            tracing::debug!("another process is building this image");
            let _ = conn.close().await;
            return Ok(());
        }
        let result = async {
            let row = environments::get_build(&st.db, digest).await?;
            if row.status != BuildStatus::Building {
                return Ok(false);
            }
            environments::start_attempt(&st.db, digest).await?;
            tokio::select! {
                r = self.run(&row) => r.map(|()| true),
                _ = st.shutdown.cancelled() => {
                    tracing::info!("shutting down mid-build; the next process resumes it");
                    Ok(false)
                }
            }
        }
        .await;
        let _ = conn.close().await;
        drop(in_flight);
        if let Ok(true) = result {
            // Saved again (after a failure) while this attempt finished: that save found
            // this task still in flight and left the build to it.
            if environments::get_build(&st.db, digest).await?.status == BuildStatus::Building {
                self.spawn_build(digest.to_owned());
            }
            self.inner.sessions.boot_waiting(digest).await?;
            self.spawn_collect();
        }
        result.map(|_| ())
    }

    /// Runs the build and records its outcome and log.
    async fn run(&self, row: &BuildRecord) -> Result<()> {
        let st = &self.inner;
        let backend = st.sessions.backend().clone();
        let ca = st.sessions.settings().extra_ca.clone();
        let file = dockerfile::dockerfile(&row.base_image, &row.packages.0, ca.as_ref());
        let context = dockerfile::context(&file, ca.as_ref())
            .map_err(|e| anyhow::anyhow!("building the context: {e}"))?;
        let build = ImageBuild {
            tag: row.image.clone(),
            context: Bytes::from(context),
            labels: BTreeMap::from([(LABEL_ENVIRONMENT_DIGEST.to_owned(), row.digest.clone())]),
        };
        tracing::info!(image = %row.image, base = %row.base_image, "building an environment image");
        let started = std::time::Instant::now();
        let progress = Mutex::new(Progress::default());
        {
            let mut p = progress.lock().expect("the log");
            p.text.push_str("# Dockerfile\n");
            p.text.push_str(&file);
            p.text.push_str("# build\n");
        }
        let log = |line: &str| progress.lock().expect("the log").line(line);
        let mut outcome = backend.build_image(&build, &log).await;
        // The Engine's build cache may pick a layer image that a collection elsewhere (another
        // process, another deployment on the same Engine) removes under it; a later attempt
        // builds without that layer.
        // A build request the Engine refused or dropped (not a step that failed) is attempted
        // again too: the same removal can surface as the request's answer, and concurrent
        // builds on one Engine have failed that way in CI with nothing wrong in the build.
        for _ in 1..BUILD_ATTEMPTS {
            let why = match &outcome {
                Ok(Err(engine)) if vanished_image(engine) => {
                    format!("an image the build used was removed meanwhile ({engine})")
                }
                Err(e) => format!("the Engine did not run the build ({e})"),
                _ => break,
            };
            tracing::warn!(%why, "building again");
            log(&format!("# {why}; building again"));
            outcome = backend.build_image(&build, &log).await;
        }
        if let Err(e) = &outcome {
            // The log is where a person looks first; the error itself stays ours.
            log(&format!("# the Engine refused the build: {e}"));
        }
        let p = progress.into_inner().expect("the log");
        let error = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(engine)) => Some(p.error(&row.base_image, &engine)),
            Err(e) => Some(format!(
                "the image build could not run: {}",
                internal_reference(&e)
            )),
        };
        let key = format!(
            "environments/{}/{}.log",
            row.digest,
            uuid::Uuid::now_v7().simple()
        );
        let text = p.text;
        let stream = futures::stream::once(async move { Ok(Bytes::from(text)) });
        st.blobs
            .put(&key, Box::pin(stream))
            .await
            .map_err(|e| anyhow::anyhow!("storing the build log: {e}"))?;
        let mut tx = st.db.begin().await?;
        environments::finish_build(&mut tx, &row.digest, error.as_deref(), &key).await?;
        tx.commit().await?;
        match &error {
            None => tracing::info!(
                ms = started.elapsed().as_millis() as u64,
                "environment image ready"
            ),
            Some(e) => tracing::warn!(error = %e, "environment image build failed"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_removed_mid_build_is_told_from_a_failed_step() {
        assert!(vanished_image("failed to get digest sha256:21967b31a64e: open /var/lib/docker/image/overlay2/imagedb/content/sha256/21967b31a64e: no such file or directory"));
        assert!(vanished_image("No such image: sha256:21967b31a64e"));
        assert!(!vanished_image(
            "The command '/bin/sh -c pip install nope' returned a non-zero code: 1"
        ));
    }

    #[test]
    fn a_failure_names_the_step_s_manager_and_its_own_words() {
        let mut p = Progress::default();
        p.line("Step 3/4 : RUN : manager=npm; set -e; command -v npm || { echo \"sandbox-agents: no npm\"; }");
        p.line("\u{1b}[91msandbox-agents: the image has no npm\n\u{1b}[0m");
        p.line("Removing intermediate container 2d01bd3c2fe7");
        assert_eq!(
            p.error("b", "x returned a non-zero code: 127"),
            "npm: the image has no npm"
        );
        let mut p = Progress::default();
        p.line("Step 4/4 : RUN : manager=pip; set -e; pip install nope");
        p.line("ERROR: No matching distribution found for nope");
        assert_eq!(
            p.error("b", "The command '...' returned a non-zero code: 1"),
            "pip failed (exit code 1): ERROR: No matching distribution found for nope"
        );
        assert!(Progress::default()
            .error("base:1", "pull access denied")
            .starts_with("the base image base:1"));
    }
}
