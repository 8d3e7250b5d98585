//! The consolidation worker: claims a queued consolidation (`store::memory_consolidations`),
//! makes one model call (the agent's model, through its transport) with the agent's store as
//! it is now, the session's baseline, its `MEMORY.md` as it ended and the tail of its
//! transcript, and writes the merged store with compare-and-set on its version.
//!
//! Two sessions consolidating at once both land: the one whose write finds the version moved
//! on re-reads the store (which now holds the other's merge) and asks the model again with it,
//! so no update is lost. An answer that does not parse, or a call that fails, fails the
//! attempt with a log line; the job is retried after a growing pause, up to
//! [`MAX_ATTEMPTS`] claims, then marked failed. A claim holds a lease rather than a
//! transaction: a worker that dies mid-call leaves the job to be claimed again when it ends.

use super::reply::{self, Merged, FORMAT};
use crate::usage::{add_into, consolidation_usage, Ledger};
use crate::Runs;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::memory::AgentMemory;
use sandbox_agents_model::{ChatRequest, Message};
use sandbox_agents_store::memory_consolidations::{self, Consolidation};
use sandbox_agents_store::{agent_memories, agents};
use std::time::Duration;

/// How the consolidation's system prompt starts: what tells its model calls from a turn's
/// (tests script the fake model on it).
pub const CONSOLIDATION_MARKER: &str = "You consolidate the long-term memory of an AI agent.";

/// How long a claim holds a job: longer than a model call takes (the client's own timeouts
/// end one well before).
const LEASE_SECS: f64 = 900.0;
/// Claims of one job before it is failed for good.
const MAX_ATTEMPTS: i32 = 4;
/// Writes that may find the store moved on, within one attempt.
const MAX_CONFLICTS: usize = 8;
/// How often the worker looks for jobs queued by any process.
const POLL: Duration = Duration::from_secs(5);

/// The pause before a failed job is claimed again: 2 s, 8 s, 18 s.
fn retry_pause(attempts: i32) -> f64 {
    2.0 * f64::from(attempts.max(1)).powi(2)
}

impl Runs {
    /// Claims one queued consolidation and runs it to its end (written, or failed for a retry
    /// or for good); `false` when no job is ready. Tests drive consolidation with it; two calls
    /// at once claim two different jobs.
    #[tracing::instrument(skip_all)]
    pub async fn consolidate_memory_once(&self) -> sandbox_agents_errors::Result<bool> {
        let db = &self.inner.db;
        let Some(job) = memory_consolidations::claim(db, LEASE_SECS).await? else {
            return Ok(false);
        };
        let mut ledger = Ledger::default();
        let result = self.consolidate(&job, &mut ledger).await;
        // Usage: every call counts, a failed attempt's too (it was paid for). The job keeps
        // the sum of its attempts (which `GET /api/usage` reads), and the session whose stop
        // queued it gets each attempt's share in its own usage, in the same transaction as
        // the attempt's end, so neither counts a call twice nor misses one.
        let spent = consolidation_usage(&ledger);
        let mut total = job.usage.0.clone();
        add_into(&mut total, &spent);
        let mut tx = db.begin().await?;
        match result {
            Ok(version) => {
                memory_consolidations::finish(&mut *tx, job.id, &total).await?;
                tracing::info!(job = job.id, session.id = %job.session_id, version, "memory consolidated");
            }
            Err(e) => {
                let retry = (job.attempts < MAX_ATTEMPTS).then(|| retry_pause(job.attempts));
                tracing::warn!(job = job.id, session.id = %job.session_id, attempt = job.attempts, retry_in_secs = ?retry, error = %e, "memory consolidation failed");
                memory_consolidations::fail(&mut *tx, job.id, &format!("{e:#}"), retry, &total)
                    .await?;
            }
        }
        if ledger.total.requests > 0 {
            memory_consolidations::charge_session(&mut tx, job.session_id, &spent, add_into)
                .await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    /// Runs every job that is ready; how many ran.
    pub async fn consolidate_memories(&self) -> sandbox_agents_errors::Result<usize> {
        let mut n = 0;
        while self.consolidate_memory_once().await? {
            n += 1;
        }
        Ok(n)
    }

    /// Starts the worker: every [`POLL`], the jobs that are ready, until shutdown (a job cut
    /// short by it is claimed again when its lease ends).
    pub fn spawn_memory_worker(&self) {
        let rt = self.clone();
        tokio::spawn(async move {
            let shutdown = rt.inner.shutdown.clone();
            let mut tick = tokio::time::interval(POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! { _ = tick.tick() => {}, _ = shutdown.cancelled() => return }
                tokio::select! {
                    r = rt.consolidate_memories() => {
                        if let Err(e) = r {
                            tracing::warn!(error = %e, "the memory consolidation sweep failed");
                        }
                    }
                    _ = shutdown.cancelled() => return,
                }
            }
        });
    }

    /// One attempt: model calls until a merge is written on the version it read; the new
    /// version. Each call's usage goes to `ledger` (as the agent's, on its model) as it ends.
    async fn consolidate(&self, job: &Consolidation, ledger: &mut Ledger) -> anyhow::Result<i64> {
        let db = &self.inner.db;
        let agent = agents::get(db, job.project_id, &AgentRef::Id(job.agent_id)).await?;
        let client = self
            .inner
            .models
            .for_transport(agent.spec.transport)
            .map_err(anyhow::Error::msg)?
            .clone();
        let model = agent
            .spec
            .model
            .clone()
            .unwrap_or_else(|| self.inner.sessions.settings().default_model.clone());
        for _ in 0..MAX_CONFLICTS {
            let store = agent_memories::get(db, job.project_id, job.agent_id).await?;
            let req = ChatRequest::new(
                model.clone(),
                vec![
                    Message::system(system_prompt()),
                    Message::user(user_prompt(&store, job)),
                ],
            );
            let completion = client.complete(req).await?;
            ledger.add(&model, agent.slug.as_str(), completion.usage);
            self.count_call(
                job.project_id,
                job.session_id,
                None,
                &completion.usage,
                None,
            )
            .await;
            let Merged { memory, summary } = reply::parse(&completion.text).map_err(|e| {
                anyhow::anyhow!("the model's answer is not in the format asked: {e}")
            })?;
            match agent_memories::put(
                db,
                job.project_id,
                job.agent_id,
                &memory,
                &summary,
                store.version,
            )
            .await?
            {
                Some(written) => return Ok(written.version),
                None => tracing::info!(
                    job = job.id,
                    read = store.version,
                    "the memory changed meanwhile; merging again into the newer store"
                ),
            }
        }
        anyhow::bail!("the memory kept changing during {MAX_CONFLICTS} merges; retrying later")
    }
}

fn system_prompt() -> String {
    format!(
        "{CONSOLIDATION_MARKER} Its sessions start with MEMORY.md in their workspace and may \
         edit it; when a session ends you merge what it learnt into the agent's store, which \
         other sessions update too. Keep every fact of the current memory that the session did \
         not contradict (other sessions wrote it), add what the session learnt that later \
         sessions need (decisions, conventions, paths, commands, pitfalls, preferences), \
         correct what it found to be wrong, and drop what is obsolete or a one-off. Be concise \
         and factual; never invent.\n\n{FORMAT}"
    )
}

fn block(tag: &str, text: &str) -> String {
    format!("<{tag}>\n{text}\n</{tag}>")
}

/// The job and the store as the model reads them.
fn user_prompt(store: &AgentMemory, job: &Consolidation) -> String {
    let mut parts = vec![
        format!("The agent's memory now (version {}):", store.version),
        block("current_memory", &store.memory),
        block("current_summary", &store.summary),
    ];
    if job.baseline == store.memory {
        parts.push("The session started from this same MEMORY.md.".into());
    } else {
        parts.push("The session started from this MEMORY.md (the store has changed since):".into());
        parts.push(block("session_start", &job.baseline));
    }
    match &job.ended {
        Some(ended) if *ended == job.baseline => {
            parts.push("The session did not edit memories/MEMORY.md.".into())
        }
        Some(ended) => {
            parts.push("The session left memories/MEMORY.md as:".into());
            parts.push(block("session_end", ended));
        }
        None => parts.push("The session left no readable memories/MEMORY.md.".into()),
    }
    parts.push("The end of the session's transcript:".into());
    parts.push(block("transcript", &job.transcript));
    parts.push(FORMAT.into());
    parts.join("\n\n")
}
