//! A backend that is configured but cannot be reached: every operation fails with the
//! reason, so the server still serves everything that needs no sandbox (agents, logs) and
//! says plainly why sessions cannot boot.

use crate::{
    BuildFailure, BuildLog, ExecOutput, ExecRequest, ImageRecipe, ListedSandbox, Result, Sandbox,
    SandboxBackend, SandboxError, SandboxSpec, SandboxStatus,
};
use async_trait::async_trait;
use bytes::Bytes;
use futures::stream::BoxStream;
use std::time::Duration;

pub struct Unavailable {
    pub name: &'static str,
    pub reason: String,
}

impl Unavailable {
    fn err<T>(&self) -> Result<T> {
        Err(SandboxError::Backend(self.reason.clone()))
    }
}

#[async_trait]
impl SandboxBackend for Unavailable {
    fn name(&self) -> &'static str {
        self.name
    }
    async fn create(&self, _: &SandboxSpec) -> Result<Sandbox> {
        self.err()
    }
    async fn inspect(&self, _: &str) -> Result<Option<SandboxStatus>> {
        self.err()
    }
    async fn exec(&self, _: &str, _: &ExecRequest) -> Result<ExecOutput> {
        self.err()
    }
    async fn put_archive(&self, _: &str, _: &str, _: Bytes) -> Result<()> {
        self.err()
    }
    async fn get_archive(&self, _: &str, _: &str) -> Result<BoxStream<'static, Result<Bytes>>> {
        self.err()
    }
    async fn stop(&self, _: &str, _: Duration) -> Result<()> {
        self.err()
    }
    async fn remove(&self, _: &str) -> Result<()> {
        self.err()
    }
    async fn list(&self) -> Result<Vec<ListedSandbox>> {
        self.err()
    }
    async fn snapshot_image(&self, _: &str, _: &str) -> Result<String> {
        self.err()
    }
    async fn remove_image(&self, _: &str) -> Result<()> {
        self.err()
    }
    async fn build_image(
        &self,
        _: &ImageRecipe,
        _: BuildLog<'_>,
    ) -> Result<std::result::Result<(), BuildFailure>> {
        self.err()
    }
    async fn image_exists(&self, _: &str) -> Result<bool> {
        self.err()
    }
}
