//! Image builds in sandbox terms: what an image is made of ([`ImageRecipe`]: a base image,
//! packages by manager, the extra CA) and how a build fails ([`BuildFailure`]: which step,
//! why, the end of its output). How a recipe becomes an image (a Dockerfile on Docker) is
//! each backend's own business; the control plane never sees it.

use sandbox_agents_domain::ca::ExtraCaCerts;
use sandbox_agents_domain::environment::Packages;
use std::collections::BTreeMap;

/// An image to build: an environment's packages on top of its base image.
#[derive(Clone, Debug)]
pub struct ImageRecipe {
    /// The reference the image is tagged with.
    pub tag: String,
    /// The image it starts from.
    pub base_image: String,
    /// What is installed, manager by manager, in the order of [`Packages::by_manager`]: apt,
    /// cargo, gem, go and npm as root into system paths, pip as the sandbox user (as a
    /// session would). Managers other than apt and pip need their tool in the base image;
    /// a build never installs a toolchain the recipe does not name.
    pub packages: Packages,
    /// Certificates trusted before anything is fetched (an inspecting proxy's), and kept in
    /// the image's trust store.
    pub extra_ca: Option<ExtraCaCerts>,
    /// Labels of the image besides the deployment's (which every backend adds).
    pub labels: BTreeMap<String, String>,
}

/// Receives a build's output as it comes, line by line.
pub type BuildLog<'a> = &'a (dyn Fn(&str) + Send + Sync);

/// Why a build did not produce its image, as the backend read it from its builder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuildFailure {
    /// The part of the recipe that failed: a package manager's step (`"pip"`), or `None`
    /// when the base image itself could not be used.
    pub step: Option<String>,
    /// The last lines the failing step printed, joined by ` | ` (its own output, without
    /// the builder's noise).
    pub log_tail: String,
    pub cause: BuildCause,
}

/// What ended a failed build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildCause {
    /// The step explained its failure itself, in these words: the base image lacks the tool
    /// its manager needs.
    Explained(String),
    /// The builder's account: how the step ended (`exit code 1`), or, without a step, why
    /// the base image could not be used.
    Failed(String),
    /// An image the build relied on (a cached layer) was removed while it ran, by a
    /// collection elsewhere: the recipe is not at fault, and building it again does without
    /// that image. The builder's words.
    ImageVanished(String),
}

impl BuildCause {
    /// The words of the cause, whichever it is.
    pub fn words(&self) -> &str {
        match self {
            BuildCause::Explained(w) | BuildCause::Failed(w) | BuildCause::ImageVanished(w) => w,
        }
    }
}

impl std::fmt::Display for BuildFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.step, &self.cause) {
            (None, cause) => write!(f, "the base image could not be used: {}", cause.words()),
            (Some(step), BuildCause::Explained(why)) => write!(f, "{step}: {why}"),
            (Some(step), cause) if self.log_tail.is_empty() => {
                write!(f, "{step} failed ({})", cause.words())
            }
            (Some(step), cause) => {
                write!(f, "{step} failed ({}): {}", cause.words(), self.log_tail)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(step: Option<&str>, tail: &str, cause: BuildCause) -> String {
        BuildFailure {
            step: step.map(str::to_owned),
            log_tail: tail.into(),
            cause,
        }
        .to_string()
    }

    #[test]
    fn a_failure_reads_as_its_step_and_its_cause() {
        assert_eq!(
            failure(Some("npm"), "x", BuildCause::Explained("no npm".into())),
            "npm: no npm"
        );
        assert_eq!(
            failure(
                Some("pip"),
                "a | b",
                BuildCause::Failed("exit code 1".into())
            ),
            "pip failed (exit code 1): a | b"
        );
        assert_eq!(
            failure(None, "", BuildCause::Failed("pull access denied".into())),
            "the base image could not be used: pull access denied"
        );
    }
}
