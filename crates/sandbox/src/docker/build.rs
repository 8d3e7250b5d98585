//! Image builds on the Engine (`POST /build`, the classic builder: BuildKit needs a session
//! of its own and gains nothing for one Dockerfile without secrets). Every image built here
//! carries the deployment's label, like snapshots, so cleanup finds it.

use super::{error, DockerBackend};
use crate::{BuildLog, ImageBuild, Result, LABEL_DEPLOYMENT};
use bollard::errors::Error as DockerError;
use bollard::query_parameters::{BuildImageOptionsBuilder, BuilderVersion};
use futures::StreamExt;
use std::collections::HashMap;

impl DockerBackend {
    /// Builds `build.tag` from its context. A step that fails ends the stream with the
    /// Engine's error message, which is the inner error; anything else is the backend's.
    pub(crate) async fn build(
        &self,
        build: &ImageBuild,
        log: BuildLog<'_>,
    ) -> Result<std::result::Result<(), String>> {
        let mut labels: HashMap<String, String> = build
            .labels
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        labels.insert(LABEL_DEPLOYMENT.to_owned(), self.deployment.clone());
        let options = BuildImageOptionsBuilder::new()
            .dockerfile("Dockerfile")
            .t(&build.tag)
            .rm(true)
            .forcerm(true)
            .labels(&labels)
            .version(BuilderVersion::BuilderV1)
            .build();
        let mut stream = self.docker.build_image(
            options,
            None,
            Some(bollard::body_full(build.context.clone())),
        );
        while let Some(item) = stream.next().await {
            match item {
                Ok(info) => {
                    if let Some(text) = info.stream.as_deref().or(info.status.as_deref()) {
                        for line in text.lines() {
                            log(line);
                        }
                    }
                }
                Err(DockerError::DockerStreamError { error }) => {
                    log(&error);
                    return Ok(Err(error));
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
