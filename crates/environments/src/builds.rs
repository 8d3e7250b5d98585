//! Image builds: one per digest at a time across every process (the build's advisory lock,
//! held on a connection of the builder's own that dies with it), at most
//! `max_concurrent_builds` at once in a process, each finishing `ready` or `failed` with its
//! log in the blob store. A build whose builder died is `building` with nobody holding its
//! lock; [`Environments::resume_builds`] (at start and with every sweep) takes it over, so
//! none stays `building`. When one finishes, the sessions that waited for it boot.

use crate::Environments;
use bytes::Bytes;
use sandbox_agents_domain::state::BuildStatus;
use sandbox_agents_domain::text::strip_ansi;
use sandbox_agents_errors::{internal_reference, Result};
use sandbox_agents_sandbox::{BuildCause, BuildFailure, ImageRecipe, LABEL_ENVIRONMENT_DIGEST};
use sandbox_agents_store::environments::{self, BuildRecord};
use sqlx::Connection;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Most bytes of a build's log that are kept.
const MAX_LOG: usize = 4 * 1024 * 1024;
/// Longest error message.
const MAX_ERROR: usize = 2_000;
/// Attempts of a build whose images vanished under it ([`BuildCause::ImageVanished`]), or
/// whose request the backend failed.
const BUILD_ATTEMPTS: usize = 3;

/// A build's log as it is kept: without terminal colours, cut at [`MAX_LOG`].
#[derive(Default)]
pub(crate) struct Log {
    text: String,
    truncated: bool,
}

impl Log {
    fn line(&mut self, line: &str) {
        let line = strip_ansi(line);
        if self.text.len() + line.len() < MAX_LOG {
            self.text.push_str(&line);
            self.text.push('\n');
        } else if !self.truncated {
            self.truncated = true;
            self.text
                .push_str("[the rest of the log was cut: it is longer than 4 MiB]\n");
        }
    }
}

/// The failure in words for the build's row and the sessions that waited: which manager
/// failed, and why.
fn failure_message(failure: &BuildFailure, base: &str) -> String {
    let msg = match (&failure.step, &failure.cause) {
        (Some(m), BuildCause::Explained(why)) => format!("{m}: {why}"),
        (Some(m), cause) => format!("{m} failed ({}): {}", cause.words(), failure.log_tail),
        (None, cause) => format!("the base image {base} could not be used: {}", cause.words()),
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
        let recipe = ImageRecipe {
            tag: row.image.clone(),
            base_image: row.base_image.clone(),
            packages: row.packages.0.clone(),
            extra_ca: st.sessions.settings().extra_ca.clone(),
            labels: BTreeMap::from([(LABEL_ENVIRONMENT_DIGEST.to_owned(), row.digest.clone())]),
        };
        tracing::info!(image = %row.image, base = %row.base_image, "building an environment image");
        let started = std::time::Instant::now();
        let kept = Mutex::new(Log::default());
        {
            // What the backend makes of the recipe (on Docker, the Dockerfile) heads the log.
            let mut k = kept.lock().expect("the log");
            if let Some(description) = backend.describe_build(&recipe) {
                k.text.push_str(&description);
                if !description.ends_with('\n') {
                    k.text.push('\n');
                }
            }
            k.text.push_str("# build\n");
        }
        let log = |line: &str| kept.lock().expect("the log").line(line);
        if !backend.capabilities().image_builds {
            // Said in the build's own words, not as an internal error: nothing failed, this
            // deployment cannot build at all (its sessions are refused at create, too).
            let error = format!(
                "this deployment's sandbox backend ({}) builds no images, so this environment's \
                 packages cannot be installed; use an environment without packages, or a \
                 deployment on the docker backend",
                backend.name()
            );
            log(&format!("# {error}"));
            let text = kept.into_inner().expect("the log").text;
            return self.record_build(row, Some(error), text, started).await;
        }
        let mut outcome = backend.build_image(&recipe, &log).await;
        // A builder's cache may pick a layer image that a collection elsewhere (another
        // process, another deployment on the same host) removes under it; a later attempt
        // builds without that layer.
        // A build request the backend refused or dropped (not a step that failed) is
        // attempted again too: the same removal can surface as the request's answer, and
        // concurrent builds on one Docker Engine have failed that way in CI with nothing
        // wrong in the build.
        for _ in 1..BUILD_ATTEMPTS {
            let why = match &outcome {
                Ok(Err(BuildFailure {
                    cause: BuildCause::ImageVanished(words),
                    ..
                })) => {
                    format!("an image the build used was removed meanwhile ({words})")
                }
                Err(e) => format!("the sandbox backend did not run the build ({e})"),
                _ => break,
            };
            tracing::warn!(%why, "building again");
            log(&format!("# {why}; building again"));
            outcome = backend.build_image(&recipe, &log).await;
        }
        if let Err(e) = &outcome {
            // The log is where a person looks first; the error itself stays ours.
            log(&format!("# the sandbox backend refused the build: {e}"));
        }
        let p = kept.into_inner().expect("the log");
        let error = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(failure)) => Some(failure_message(&failure, &row.base_image)),
            Err(e) => Some(format!(
                "the image build could not run: {}",
                internal_reference(&e)
            )),
        };
        self.record_build(row, error, p.text, started).await
    }

    /// Stores the build's log and records its outcome.
    async fn record_build(
        &self,
        row: &BuildRecord,
        error: Option<String>,
        text: String,
        started: std::time::Instant,
    ) -> Result<()> {
        let st = &self.inner;
        let key = format!(
            "environments/{}/{}.log",
            row.digest,
            uuid::Uuid::now_v7().simple()
        );
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

    fn failure(step: Option<&str>, tail: &str, cause: BuildCause) -> BuildFailure {
        BuildFailure {
            step: step.map(str::to_owned),
            log_tail: tail.into(),
            cause,
        }
    }

    #[test]
    fn a_failure_names_the_step_s_manager_and_its_own_words() {
        assert_eq!(
            failure_message(
                &failure(
                    Some("npm"),
                    "",
                    BuildCause::Explained("the image has no npm".into())
                ),
                "b"
            ),
            "npm: the image has no npm"
        );
        assert_eq!(
            failure_message(
                &failure(
                    Some("pip"),
                    "ERROR: No matching distribution found for nope",
                    BuildCause::Failed("exit code 1".into())
                ),
                "b"
            ),
            "pip failed (exit code 1): ERROR: No matching distribution found for nope"
        );
        assert!(failure_message(
            &failure(None, "", BuildCause::Failed("pull access denied".into())),
            "base:1"
        )
        .starts_with("the base image base:1 could not be used: pull access denied"));
        let long = failure_message(
            &failure(
                Some("pip"),
                &"é".repeat(MAX_ERROR),
                BuildCause::Failed("x".into()),
            ),
            "b",
        );
        assert!(long.ends_with('…') && long.len() <= MAX_ERROR + '…'.len_utf8());
    }

    #[test]
    fn a_log_longer_than_its_limit_says_it_was_cut() {
        let mut log = Log::default();
        log.line("\u{1b}[91mred\u{1b}[0m");
        assert_eq!(log.text, "red\n");
        let big = "x".repeat(MAX_LOG / 2);
        log.line(&big);
        log.line(&big);
        log.line(&big);
        assert!(log.text.len() < MAX_LOG + 100);
        assert!(log
            .text
            .ends_with("[the rest of the log was cut: it is longer than 4 MiB]\n"));
    }
}
