//! Which project a request acts in, answered from memory: every project-scoped request names
//! its project by id or slug (or names none, meaning the deployment's only one), and reading
//! that from PostgreSQL was a round trip ahead of each such request's own work.
//!
//! The cache is only used while the process listens for changes to the projects table (a
//! trigger announces each one in its transaction; [`EventHub::projects_epoch`]). An answer is
//! kept with the epoch read before its query, and only if the epoch did not move during the
//! query; it is used only while the epoch stays the same. So an answer is at most as old as
//! the delivery of the change's notification (about a millisecond after its commit, the same
//! staleness as the event stream's), and in this process not even that: the routes that change
//! projects call [`ProjectIds::invalidate`] before they answer.
//!
//! Ids are kept, and each project's limits (the auth layer reads `requests_per_minute` on
//! every request); what a project is called is read fresh where it is shown.

use crate::hub::EventHub;
use crate::{projects, Db, Result};
use sandbox_agents_domain::budget::ProjectLimits;
use sandbox_agents_domain::ProjectId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Refs (ids or slugs) kept at most; the cache is emptied when it is full (refs come from
/// requests, so they must not grow it without bound).
const MAX_REFS: usize = 4096;

/// The process's cache of project ids; cheap to clone.
#[derive(Clone)]
pub struct ProjectIds {
    db: Db,
    hub: EventHub,
    inner: Arc<Inner>,
}

struct Inner {
    /// Moved by [`ProjectIds::invalidate`]: a change this process made.
    local: AtomicU64,
    cache: Mutex<Cache>,
}

#[derive(Default)]
struct Cache {
    /// The (hub, local) epochs the entries are valid at.
    epoch: (u64, u64),
    /// The only project: Some(None) when there are none or several.
    only: Option<Option<ProjectId>>,
    by_ref: HashMap<String, ProjectId>,
    limits: HashMap<ProjectId, ProjectLimits>,
}

impl ProjectIds {
    pub fn new(db: Db, hub: EventHub) -> Self {
        ProjectIds {
            db,
            hub,
            inner: Arc::new(Inner {
                local: AtomicU64::new(0),
                cache: Mutex::new(Cache::default()),
            }),
        }
    }

    /// Call after changing the projects table, before answering: this process's next lookups
    /// read it again without waiting for the change's notification.
    pub fn invalidate(&self) {
        self.inner.local.fetch_add(1, Ordering::AcqRel);
    }

    /// The current epoch, None when nothing may be cached (nobody listens).
    fn epoch(&self) -> Option<(u64, u64)> {
        let local = self.inner.local.load(Ordering::Acquire);
        self.hub.projects_epoch().map(|hub| (hub, local))
    }

    /// The cache if its entries are valid at `epoch`, emptied for it otherwise.
    fn cache_at(&self, epoch: (u64, u64)) -> std::sync::MutexGuard<'_, Cache> {
        let mut cache = self.inner.cache.lock().expect("project id cache poisoned");
        if cache.epoch != epoch {
            *cache = Cache {
                epoch,
                ..Cache::default()
            };
        }
        cache
    }

    /// Keeps an answer read since `before` if the epoch has not moved since.
    fn keep(&self, before: Option<(u64, u64)>, put: impl FnOnce(&mut Cache)) {
        if let Some(before) = before {
            if self.epoch() == Some(before) {
                put(&mut self.cache_at(before));
            }
        }
    }

    /// The project `r` (an id or a slug) names, if it exists.
    pub async fn by_ref(&self, r: &str) -> Result<Option<ProjectId>> {
        let before = self.epoch();
        if let Some(epoch) = before {
            if let Some(id) = self.cache_at(epoch).by_ref.get(r) {
                return Ok(Some(*id));
            }
        }
        let found = projects::by_ref(&self.db, r).await?.map(|p| p.project_id());
        if let Some(id) = found {
            self.keep(before, |c| {
                if c.by_ref.len() >= MAX_REFS {
                    c.by_ref.clear();
                }
                c.by_ref.insert(r.to_owned(), id);
            });
        }
        Ok(found)
    }

    /// The deployment's only project, None when there are none or several.
    pub async fn only(&self) -> Result<Option<ProjectId>> {
        let before = self.epoch();
        if let Some(epoch) = before {
            if let Some(only) = self.cache_at(epoch).only {
                return Ok(only);
            }
        }
        let found = projects::only(&self.db).await?.map(|p| p.project_id());
        self.keep(before, |c| c.only = Some(found));
        Ok(found)
    }

    /// A project's limits (none for a project that does not exist).
    pub async fn limits(&self, id: ProjectId) -> Result<ProjectLimits> {
        let before = self.epoch();
        if let Some(epoch) = before {
            if let Some(l) = self.cache_at(epoch).limits.get(&id) {
                return Ok(*l);
            }
        }
        let found = projects::limits(&self.db, id).await?;
        self.keep(before, |c| {
            if c.limits.len() >= MAX_REFS {
                c.limits.clear();
            }
            c.limits.insert(id, found);
        });
        Ok(found)
    }
}
