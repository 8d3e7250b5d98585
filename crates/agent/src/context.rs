//! A turn's context: what the model is given before its first step. The conversation's
//! holder (the session's agent, or the agent a handoff gave it to) speaks in the run's frame
//! (`speaker.rs` chooses its instructions, model and tools; the session's agent also gets
//! the boot's skills and the memory summary it staged), over the stored conversation and
//! the prompt; a parked run that continues gets its turn so far, and the calls it waited on
//! and the subagent calls that parked with it, to settle first (`turn.rs`). And what the turn accumulates from there
//! ([`Turn`]). The session's last compaction replaces the history it covers
//! (`compaction.rs`).

use crate::finish::Outcome;
use crate::frame::{Cast, Frame, ParkedFrame};
use crate::park::Progress;
use crate::stop::Stop;
use crate::tally::Turn;
use crate::Runs;
use sandbox_agents_domain::agent::AgentRef;
use sandbox_agents_domain::{ProjectId, RunId, SessionId};
use sandbox_agents_model::Message;
use sandbox_agents_store::sessions::Holder;
use sandbox_agents_store::{agents, runs, session_memories, sessions};
use std::time::Instant;

/// What a turn's steps are made from.
pub(crate) struct Context {
    pub cast: Cast,
    /// The run's frame: the holder, over the conversation so far, this turn's prompt and
    /// (when resumed) steps included.
    pub frame: Frame,
    /// A parked run that continues here (its steps so far are in `turn`).
    pub resumed: bool,
    /// Its subagent calls that parked, to continue first.
    pub nested: Vec<ParkedFrame>,
    /// The run's own calls it parked on (rows), whose answers come first (`approvals::settle`).
    pub awaiting: Vec<i64>,
}

impl Runs {
    /// Reads the session, its agent, the holder and the run, and builds the turn's context;
    /// fills in what `turn` records when the run resumes.
    pub(crate) async fn context(
        &self,
        project: ProjectId,
        id: SessionId,
        run: RunId,
        turn: &mut Turn,
        started: Instant,
    ) -> Result<Context, Stop> {
        let db = &self.inner.db;
        let session = sessions::get(db, project, id).await?;
        let root =
            agents::resolve(db, project, &AgentRef::Id(session.agent_id), session.pins()).await?;
        let record = runs::get(db, run).await?.ok_or(Stop::Gone)?;
        let cast = Cast {
            project,
            id,
            run,
            run_tools: record.client_tools.0.clone(),
            skills: sessions::skills(db, id).await?,
            // The summary this boot staged with `memories/` (none without the capability).
            memory: session_memories::get(db, id)
                .await?
                .map(|staged| crate::memory::section(&staged.summary)),
            session,
            root,
            started,
        };
        let mut holder = sessions::holder(db, id).await?;
        let speaker = match holder.agent.clone() {
            Some(slug) => {
                let back = holder.stack.last().cloned().unwrap_or_default();
                let seat = cast.seat(holder.stack.len(), Some(back.as_str()));
                self.speaker_by_slug(project, &slug, &seat).await?
            }
            None => None,
        };
        let speaker = match speaker {
            Some(s) => s,
            None => {
                if holder.agent.is_some() {
                    tracing::warn!(session.id = %id, "the agent holding the conversation is gone; the session's agent takes it back");
                    holder = Holder::default();
                }
                self.speaker(project, cast.root.clone(), &cast.seat(0, Some("")))
                    .await?
            }
        };
        let mut messages = Vec::new();
        for m in runs::conversation(db, id).await? {
            match serde_json::from_value::<Message>(m) {
                Ok(m) => messages.push(m),
                Err(e) => {
                    tracing::warn!(error = %e, "skipping a stored message that does not parse")
                }
            }
        }
        messages.push(Message::user(record.prompt.clone()));
        let mut resumed = false;
        let mut nested = Vec::new();
        let mut awaiting = Vec::new();
        // A parked run continues where it stopped: its turn so far, then the answers.
        if let Some(p) = Progress::of(&record).map_err(|e| {
            Stop::Outcome(Outcome::Failed(sandbox_agents_errors::internal_reference(
                &*e,
            )))
        })? {
            turn.steps = record.turns;
            turn.ledger = p.ledger();
            turn.earlier_active = p.active_seconds;
            turn.added = p.messages;
            messages.extend(turn.added.iter().cloned());
            awaiting = p.awaiting;
            nested = p.nested;
            resumed = true;
        }
        // The session's last compaction, applied to the holder's view of the conversation.
        let mut view = speaker.view(&messages);
        let compaction = self
            .resume_compaction(id, speaker.capabilities.as_deref(), &mut view)
            .await?;
        let messages = speaker.strip_system(view);
        let frame = Frame {
            speaker,
            messages,
            steps: i64::from(turn.steps),
            max: i64::from(record.max_turns),
            tag: None,
            holder,
            compaction,
        };
        Ok(Context {
            cast,
            frame,
            resumed,
            nested,
            awaiting,
        })
    }
}
