//! Image builds on the Engine (`POST /build`, the classic builder: BuildKit needs a session
//! of its own and gains nothing for one Dockerfile without secrets). A recipe becomes a
//! Dockerfile and its context here (`dockerfile`), and the Engine's output is read here into
//! a typed [`BuildFailure`]: which manager's step failed (from its `Step n/m : RUN :
//! manager=...` line), the step's own explanation, the end of its output, and an image that
//! vanished mid-build. Every image built here carries the deployment's label, like
//! snapshots, so cleanup finds it.

use super::dockerfile::{self, MISSING_MARKER};
use super::{error, DockerBackend};
use crate::LABEL_DEPLOYMENT;
use crate::{BuildCause, BuildFailure, BuildLog, ImageRecipe, Result, SandboxError};
use bollard::errors::Error as DockerError;
use bollard::query_parameters::{BuildImageOptionsBuilder, BuilderVersion};
use futures::StreamExt;
use sandbox_agents_domain::text::strip_ansi;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Lines of a step's output a failure quotes.
const TAIL_LINES: usize = 12;

/// The Engine's words when an image it was using (a cached layer) was removed mid-build, e.g.
/// `failed to get digest sha256:…: open /var/lib/docker/image/…: no such file or directory`.
fn vanished_image(engine: &str) -> bool {
    // "layer does not exist": the cached image is still listed but a layer under it was
    // released by a removal that finished first (seen in CI with parallel test servers).
    engine.contains("failed to get digest")
        || engine.contains("No such image")
        || engine.contains("layer does not exist")
}

/// The Engine's words for a failed step, shortened: the command it quotes is in the log.
fn engine_summary(engine: &str) -> String {
    match engine.rsplit_once("returned a non-zero code: ") {
        Some((_, code)) => format!("exit code {}", code.trim()),
        None => engine.to_owned(),
    }
}

/// What the Engine's output has shown so far.
#[derive(Default)]
struct Progress {
    /// The manager whose step runs.
    manager: Option<String>,
    /// A step's own explanation (a missing tool).
    missing: Option<String>,
    /// The running step's last lines of output, without the Engine's noise.
    tail: VecDeque<String>,
}

impl Progress {
    fn line(&mut self, line: &str) {
        let line = strip_ansi(line);
        if line.starts_with("Step ") {
            self.manager = dockerfile::step_manager(&line).map(str::to_owned);
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

    /// The failure the Engine's error `engine` ends the build with.
    fn failure(&self, engine: &str) -> BuildFailure {
        let log_tail = self
            .tail
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(" | ");
        let cause = if vanished_image(engine) {
            BuildCause::ImageVanished(engine.to_owned())
        } else {
            match (&self.manager, &self.missing) {
                (Some(_), Some(why)) => BuildCause::Explained(why.clone()),
                (Some(_), None) => BuildCause::Failed(engine_summary(engine)),
                // The base image's own failure is told whole (no step quoted a command).
                (None, _) => BuildCause::Failed(engine.to_owned()),
            }
        };
        BuildFailure {
            step: self.manager.clone(),
            log_tail,
            cause,
        }
    }
}

impl DockerBackend {
    /// The Dockerfile of `recipe`.
    pub(super) fn dockerfile(recipe: &ImageRecipe) -> String {
        dockerfile::dockerfile(
            &recipe.base_image,
            &recipe.packages,
            recipe.extra_ca.as_ref(),
        )
    }

    /// Builds `recipe.tag`. A step that fails ends the stream with the Engine's error
    /// message, read into the inner error; anything else is the backend's.
    pub(crate) async fn build(
        &self,
        recipe: &ImageRecipe,
        log: BuildLog<'_>,
    ) -> Result<std::result::Result<(), BuildFailure>> {
        let file = Self::dockerfile(recipe);
        let context = dockerfile::context(&file, recipe.extra_ca.as_ref())
            .map_err(|e| SandboxError::Backend(format!("building the context: {e}")))?;
        let mut labels: HashMap<String, String> = recipe
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        labels.insert(LABEL_DEPLOYMENT.to_owned(), self.deployment.clone());
        let options = BuildImageOptionsBuilder::new()
            .dockerfile("Dockerfile")
            .t(&recipe.tag)
            .rm(true)
            .forcerm(true)
            .labels(&labels)
            .version(BuilderVersion::BuilderV1)
            .build();
        let progress = Mutex::new(Progress::default());
        let line = |text: &str| {
            progress.lock().expect("the build's progress").line(text);
            log(text);
        };
        let mut stream =
            self.docker
                .build_image(options, None, Some(bollard::body_full(context.into())));
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(text) = info.stream.as_deref().or(info.status.as_deref()) {
                        for l in text.lines() {
                            line(l);
                        }
                    }
                }
                Err(DockerError::DockerStreamError { error }) => {
                    line(&error);
                    let progress = progress.into_inner().expect("the build's progress");
                    return Ok(Err(progress.failure(&error)));
                }
                Err(e) => return Err(error::backend(e)),
            }
        }
        Ok(Ok(()))
    }

    pub(crate) async fn has_image(&self, image: &str) -> Result<bool> {
        match self.docker.inspect_image(image).await {
            Ok(_) => Ok(true),
            Err(e) if error::is_not_found(&e) => Ok(false),
            Err(e) => Err(error::backend(e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_removed_mid_build_is_told_from_a_failed_step() {
        let p = Progress::default();
        let vanished = "failed to get digest sha256:21967b31a64e: open /var/lib/docker/image/overlay2/imagedb/content/sha256/21967b31a64e: no such file or directory";
        assert!(matches!(
            p.failure(vanished).cause,
            BuildCause::ImageVanished(_)
        ));
        assert!(matches!(
            p.failure("No such image: sha256:21967b31a64e").cause,
            BuildCause::ImageVanished(_)
        ));
        assert!(matches!(
            p.failure("layer does not exist").cause,
            BuildCause::ImageVanished(_)
        ));
        assert!(!matches!(
            p.failure("The command '/bin/sh -c pip install nope' returned a non-zero code: 1")
                .cause,
            BuildCause::ImageVanished(_)
        ));
    }

    #[test]
    fn a_failure_names_the_step_s_manager_and_its_own_words() {
        let mut p = Progress::default();
        p.line("Step 3/4 : RUN : manager=npm; set -e; command -v npm || { echo \"sandbox-agents: no npm\"; }");
        p.line("\u{1b}[91msandbox-agents: the image has no npm\n\u{1b}[0m");
        p.line("Removing intermediate container 2d01bd3c2fe7");
        let f = p.failure("x returned a non-zero code: 127");
        assert_eq!(f.step.as_deref(), Some("npm"));
        assert_eq!(
            f.cause,
            BuildCause::Explained("the image has no npm".into())
        );
        assert_eq!(f.to_string(), "npm: the image has no npm");

        let mut p = Progress::default();
        p.line("Step 4/4 : RUN : manager=pip; set -e; pip install nope");
        p.line("ERROR: No matching distribution found for nope");
        let f = p.failure("The command '...' returned a non-zero code: 1");
        assert_eq!(f.step.as_deref(), Some("pip"));
        assert_eq!(f.cause, BuildCause::Failed("exit code 1".into()));
        assert_eq!(f.log_tail, "ERROR: No matching distribution found for nope");

        let f = Progress::default().failure("pull access denied");
        assert_eq!(f.step, None);
        assert_eq!(f.cause, BuildCause::Failed("pull access denied".into()));
    }
}
