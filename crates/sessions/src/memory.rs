//! The agent's memory in a session's workspace (the `memory` capability): staged under
//! `memories/` at every boot, read back at a stop.
//!
//! A boot writes the store's current `MEMORY.md` and summary (whatever the workspace came
//! from: a restored archive holds the copy of an earlier boot, which the store has merged or
//! superseded since) and records what it staged (`store::session_memories`). A stop or idle
//! release, while the sandbox still runs, reads `memories/MEMORY.md` back and hands the
//! consolidation (`store::memory_consolidations`) the baseline, the file as it ended and the
//! tail of the transcript since the boot; the job is queued in the transaction that records
//! the stop, so a stop that happened has its consolidation, and the model call runs later,
//! in the run loop's worker (`sandbox-agents-agent`), never in the stop's path.
//!
//! A sandbox can be lost (removed or killed behind our back, the host
//! rebooted), and then its `MEMORY.md` cannot be read at the stop. What a user expects is that
//! what the agent wrote during the turns that finished is not lost with it, so the file is
//! also read back at a safer point: at the end of every run (and when a run parks), before
//! its terminal event, into `session_memories.last_read`. A stop that cannot read the file
//! (or the reconciler, finding the sandbox gone) consolidates from that copy with the
//! transcript, which the database holds anyway; an exited sandbox that still exists is
//! read as a running one is. Only what was written after the last run ended (by an exec, say)
//! and only in a sandbox that is gone is lost: nothing could recover it.

use crate::Sessions;
use bytes::Bytes;
use futures::StreamExt;
use sandbox_agents_domain::agent::{AgentRecord, AgentRef, Capability};
use sandbox_agents_domain::memory::{
    transcript, MAX_MEMORY_BYTES, MAX_TRANSCRIPT_CHARS, MEMORY_FILE, SUMMARY_FILE,
};
use sandbox_agents_domain::session::SessionStatus;
use sandbox_agents_domain::SessionId;
use sandbox_agents_errors::Result;
use sandbox_agents_sandbox::{SandboxError, WORKDIR};
use sandbox_agents_store::memory_consolidations::NewConsolidation;
use sandbox_agents_store::session_memories::{self, StagedMemory};
use sandbox_agents_store::sessions::{self, SessionRecord};
use sandbox_agents_store::{agent_memories, agents, runs};
use sandbox_agents_workspace::manifest::Archive;
use std::io::Read;

/// The most bytes of a session's `MEMORY.md` a stop reads back: the store's limit, with room
/// for a session that overshot it (the consolidation's answer must fit again).
const READ_BACK_MAX: usize = 4 * MAX_MEMORY_BYTES;

/// Whether the agent asks for memory.
pub(crate) fn has_memory(agent: &AgentRecord) -> bool {
    agent
        .spec
        .capabilities
        .iter()
        .flatten()
        .any(|c| *c == Capability::Memory)
}

impl Sessions {
    /// Stages the agent's memory store under `memories/` in `sandbox` and
    /// records what was staged; forgets an earlier boot's record when the agent no longer has
    /// the capability. A failure is the boot's error (a session promised memory must have it).
    #[tracing::instrument(skip_all, fields(session.id = %s.id))]
    pub(crate) async fn stage_memory(
        &self,
        s: &SessionRecord,
        agent: &AgentRecord,
        sandbox: &str,
    ) -> Result<()> {
        let db = &self.inner.db;
        if !has_memory(agent) {
            session_memories::clear(db, s.session_id()).await?;
            return Ok(());
        }
        let store = agent_memories::get(db, s.project_id, agent.id).await?;
        let mut tar = Archive::new();
        tar.file(MEMORY_FILE, store.memory.as_bytes(), 0o644)
            .and_then(|_| tar.file(SUMMARY_FILE, store.summary.as_bytes(), 0o644))
            .map_err(|e| anyhow::anyhow!("building the memory archive: {e}"))?;
        let tar = tar
            .finish()
            .map_err(|e| anyhow::anyhow!("building the memory archive: {e}"))?;
        self.inner
            .backend
            .put_archive(sandbox, WORKDIR, Bytes::from(tar))
            .await?;
        let start = runs::conversation(db, s.session_id()).await?.len();
        session_memories::record(
            db,
            s.session_id(),
            &StagedMemory {
                agent_id: agent.id,
                version: store.version,
                memory: store.memory,
                summary: store.summary,
                conversation_start: i32::try_from(start).unwrap_or(i32::MAX),
                last_read: None,
            },
        )
        .await?;
        tracing::info!(version = store.version, "memory staged");
        Ok(())
    }

    /// Reads the running session's `memories/MEMORY.md` back and keeps it as the last copy
    /// read (see the module's doc); the run loop calls it at the end of every run. Nothing
    /// when the session's boot staged no memory or its sandbox is not running; never fails:
    /// what cannot be read is logged, and the previous copy stays.
    #[tracing::instrument(skip_all, fields(session.id = %id))]
    pub async fn read_back_memory(&self, id: SessionId) {
        if let Err(e) = self.try_read_back_memory(id).await {
            tracing::warn!(error = %e, "could not read memories/MEMORY.md back after the run; the previous copy is kept");
        }
    }

    async fn try_read_back_memory(&self, id: SessionId) -> Result<()> {
        let db = &self.inner.db;
        if session_memories::get(db, id).await?.is_none() {
            return Ok(());
        }
        let Some(s) = sessions::get_for_worker(db, id).await? else {
            return Ok(());
        };
        let (SessionStatus::Running, Some(sandbox)) = (s.status, s.sandbox_id.as_deref()) else {
            return Ok(());
        };
        if let Some(text) = self.read_memory_file(sandbox).await? {
            session_memories::record_read(db, id, &text).await?;
        }
        Ok(())
    }

    /// What a stop of `sandbox` hands to consolidation (`None` for `sandbox`:
    /// the sandbox is gone); `None` when the session was given no memory, its agent no longer
    /// asks for it, or it learnt nothing (the file unchanged and nothing said since the boot).
    /// Never fails the stop: what cannot be read is logged, and the consolidation goes on
    /// with what could (the copy read back at the end of the last run, and the transcript).
    pub(crate) async fn capture_memory(
        &self,
        s: &SessionRecord,
        sandbox: Option<&str>,
    ) -> Option<NewConsolidation> {
        match self.try_capture_memory(s, sandbox).await {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(session.id = %s.id, error = %e, "could not capture the session's memory; what it learnt is not consolidated");
                None
            }
        }
    }

    async fn try_capture_memory(
        &self,
        s: &SessionRecord,
        sandbox: Option<&str>,
    ) -> Result<Option<NewConsolidation>> {
        let db = &self.inner.db;
        let Some(staged) = session_memories::get(db, s.session_id()).await? else {
            return Ok(None);
        };
        let agent =
            agents::resolve(db, s.project_id, &AgentRef::Id(staged.agent_id), s.pins()).await?;
        if !has_memory(&agent) {
            return Ok(None);
        }
        let read = match sandbox {
            Some(c) => self.read_memory_file(c).await,
            None => Err(anyhow::anyhow!("the session's sandbox is gone").into()),
        };
        let ended = match read {
            Ok(ended) => ended,
            Err(e) if staged.last_read.is_some() => {
                tracing::warn!(session.id = %s.id, error = %e, "could not read memories/MEMORY.md back; consolidating the copy read at the end of the last run");
                staged.last_read.clone()
            }
            Err(e) => {
                tracing::warn!(session.id = %s.id, error = %e, "could not read memories/MEMORY.md back; consolidating the transcript alone");
                None
            }
        };
        let conversation = runs::conversation(db, s.session_id()).await?;
        let start = usize::try_from(staged.conversation_start)
            .unwrap_or(0)
            .min(conversation.len());
        let transcript = transcript(&conversation[start..], MAX_TRANSCRIPT_CHARS);
        let edited = ended.as_ref().is_some_and(|e| *e != staged.memory);
        if !edited && transcript.trim().is_empty() {
            tracing::debug!(session.id = %s.id, "nothing learnt; no consolidation");
            return Ok(None);
        }
        Ok(Some(NewConsolidation {
            agent_id: staged.agent_id,
            project_id: s.project_id,
            session_id: s.session_id(),
            baseline: staged.memory,
            ended,
            transcript,
        }))
    }

    /// `memories/MEMORY.md` of the running sandbox: `None` when it is missing or not a
    /// regular file (a link is never followed), or not UTF-8 (nothing a person could merge).
    async fn read_memory_file(&self, sandbox: &str) -> Result<Option<String>> {
        let path = format!("{WORKDIR}/{MEMORY_FILE}");
        let mut stream = match self.inner.backend.get_archive(sandbox, &path).await {
            Ok(s) => s,
            Err(SandboxError::NoSuchPath(_)) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let mut raw = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk?;
            raw.extend_from_slice(&chunk);
            if raw.len() > READ_BACK_MAX + 64 * 1024 {
                return Err(anyhow::anyhow!(
                    "memories/MEMORY.md is larger than {READ_BACK_MAX} bytes"
                )
                .into());
            }
        }
        let mut archive = tar::Archive::new(raw.as_slice());
        let unreadable = |e: std::io::Error| anyhow::anyhow!("reading memories/MEMORY.md: {e}");
        // The archive of one path: its first entry is the file itself.
        let Some(entry) = archive.entries().map_err(unreadable)?.next() else {
            return Ok(None);
        };
        let mut entry = entry.map_err(unreadable)?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            return Ok(None);
        }
        let mut text = Vec::new();
        entry.read_to_end(&mut text).map_err(unreadable)?;
        Ok(String::from_utf8(text).ok())
    }
}
