//! The images this deployment made (snapshots commit containers, whose deployment label the
//! image keeps): listed so that tests and operators can clean them up.

use super::{error, DockerBackend};
use crate::{Result, LABEL_DEPLOYMENT};
use bollard::query_parameters::ListImagesOptionsBuilder;
use std::collections::HashMap;

impl DockerBackend {
    /// Ids of the images labelled with this deployment (snapshot images).
    pub async fn deployment_images(&self) -> Result<Vec<String>> {
        let filters = HashMap::from([(
            "label".to_owned(),
            vec![format!("{LABEL_DEPLOYMENT}={}", self.deployment)],
        )]);
        let options = ListImagesOptionsBuilder::new().filters(&filters).build();
        let images = self
            .docker
            .list_images(Some(options))
            .await
            .map_err(error::backend)?;
        Ok(images.into_iter().map(|i| i.id).collect())
    }
}
