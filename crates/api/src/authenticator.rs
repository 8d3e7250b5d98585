//! Checking credentials, outside HTTP: the shared token (compared in constant time), API keys
//! (`ak_…`; only their SHA-256 is stored, looked up by it) and browser sessions (people),
//! the open-mode question, and per-credential rate limits. Minting and hashing live in
//! `sandbox_agents_vault::tokens`; the HTTP layer that calls this is `auth`.
//!
//! **Open mode** only while nothing is configured: no shared token, and no API key or person
//! in the database (revoked keys count: revoking the last key does not reopen the deployment;
//! deleting every key does).
//!
//! Rate limits: each credential (an API key, the shared token; callers without one by client
//! address) gets a token bucket in this process; over it, a 429 with `Retry-After` before the
//! handler runs, so a 429 never did anything. A project with its own
//! `limits.requests_per_minute` has one bucket for every request made in it instead, whoever
//! makes it (`check_project_rate`).

use crate::error::ApiError;
use crate::principal::Principal;
use sandbox_agents_domain::ProjectId;
use sandbox_agents_store::{api_keys, memberships, people};
use sandbox_agents_vault::tokens;
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;
use uuid::Uuid;

/// How long this process trusts its answer to "does any API key exist?" for callers without
/// a credential. Creating a key here updates it at once; other processes learn within this.
const OPEN_MODE_TTL: Duration = Duration::from_secs(1);
/// A key's `last_used_at` is written at most this often by each process.
const TOUCH_EVERY: Duration = Duration::from_secs(60);
/// Sign-in attempts allowed per minute for one account, and for one address.
const SIGN_IN_PER_MINUTE: u32 = 10;
/// How many checks between prunes of idle rate-limit buckets.
const PRUNE_EVERY: u64 = 4096;

type KeyedLimiter = governor::DefaultKeyedRateLimiter<String>;
type DirectLimiter = governor::DefaultDirectRateLimiter;

/// A per-credential request budget: `per_minute` sustained, bursts of `burst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub per_minute: u32,
    pub burst: u32,
}

/// The authenticator: the shared token's hash and this process's small caches.
pub struct Auth {
    token_hash: Option<[u8; 32]>,
    keys_exist: Mutex<Option<(bool, Instant)>>,
    touched: Mutex<HashMap<Uuid, Instant>>,
    limiter: Option<KeyedLimiter>,
    /// The limiter's burst: the most cells one request may take.
    burst: u32,
    /// Server processes sharing the deployment's budget (`set_processes`).
    processes: std::sync::atomic::AtomicU32,
    checks: std::sync::atomic::AtomicU64,
    /// Sign-in attempts, per account and per address (always on).
    sign_in: KeyedLimiter,
    /// The buckets of projects with their own rate, with the rate each was made for (a
    /// changed rate starts a new bucket). At most one per project.
    projects: Mutex<HashMap<ProjectId, (u32, std::sync::Arc<DirectLimiter>)>>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("token", &self.token_hash.map(|_| "***"))
            .field("rate_limited", &self.limiter.is_some())
            .finish()
    }
}

impl Auth {
    pub fn new(shared_token: Option<&str>) -> Self {
        Auth {
            token_hash: shared_token.filter(|t| !t.is_empty()).map(tokens::digest),
            keys_exist: Mutex::new(None),
            touched: Mutex::new(HashMap::new()),
            limiter: None,
            burst: 1,
            processes: std::sync::atomic::AtomicU32::new(1),
            checks: Default::default(),
            sign_in: governor::RateLimiter::keyed(
                governor::Quota::per_minute(
                    std::num::NonZeroU32::new(SIGN_IN_PER_MINUTE).expect("non-zero"),
                )
                .allow_burst(std::num::NonZeroU32::new(SIGN_IN_PER_MINUTE).expect("non-zero")),
            ),
            projects: Mutex::new(HashMap::new()),
        }
    }

    /// Limits each credential's request rate (None or a zero rate: unlimited).
    pub fn with_rate_limit(mut self, limit: Option<RateLimit>) -> Self {
        self.burst = limit.as_ref().map_or(1, |l| l.burst.max(1));
        self.limiter = limit.and_then(|l| {
            let per_minute = std::num::NonZeroU32::new(l.per_minute)?;
            let burst = std::num::NonZeroU32::new(l.burst.max(1))?;
            Some(governor::RateLimiter::keyed(
                governor::Quota::per_minute(per_minute).allow_burst(burst),
            ))
        });
        self
    }

    /// Counts a sign-in attempt for `account` from `addr`; a 429 when either is over budget.
    pub fn check_sign_in(&self, account: &str, addr: std::net::IpAddr) -> Result<(), ApiError> {
        use governor::clock::Clock;
        for key in [format!("acct:{account}"), format!("ip:{addr}")] {
            if let Err(not_until) = self.sign_in.check_key(&key) {
                let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                return Err(ApiError::TooManyRequests(wait.as_secs_f64().ceil() as u64));
            }
        }
        Ok(())
    }

    /// Tells the limiter how many server processes share the deployment's budget (see
    /// `check_rate`); at least 1.
    pub fn set_processes(&self, n: u32) {
        let n = n.max(1);
        self.processes
            .store(n, std::sync::atomic::Ordering::Relaxed);
        metrics::gauge!("sandbox_agents_server_processes").set(f64::from(n));
    }

    /// Counts one request of `who`; the 429 to answer when it is over its budget.
    ///
    /// The budget is the deployment's, not this process's: with N server processes alive on
    /// the database, each request here takes N cells of the credential's bucket, so that N
    /// processes together never let through more than the configured rate and burst. Exact
    /// when a load balancer spreads a credential's requests evenly, stricter than configured
    /// when it does not; the alternative, a database round trip per request, would cost every
    /// request more than the limit protects.
    pub fn check_rate(&self, who: &str) -> Result<(), ApiError> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        let n = self
            .checks
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if n % PRUNE_EVERY == PRUNE_EVERY - 1 {
            limiter.retain_recent();
        }
        let share = self.processes.load(std::sync::atomic::Ordering::Relaxed);
        // More processes than the burst: each still gets one request per refill.
        let cells = std::num::NonZeroU32::new(share.min(self.burst).max(1)).expect("at least 1");
        match limiter
            .check_key_n(&who.to_owned(), cells)
            .unwrap_or(Ok(()))
        {
            Ok(()) => Ok(()),
            Err(not_until) => {
                use governor::clock::Clock;
                let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                Err(ApiError::TooManyRequests(wait.as_secs_f64().ceil() as u64))
            }
        }
    }

    /// Counts one request made in `project`, whose own limit is `per_minute` requests a
    /// minute for all its callers together (in place of each credential's): bursts of up to
    /// that many, at most the deployment's burst. Shared between processes as `check_rate`'s
    /// budget is. The 429 says which limit it is.
    pub fn check_project_rate(&self, project: ProjectId, per_minute: u32) -> Result<(), ApiError> {
        let Some(rate) = std::num::NonZeroU32::new(per_minute) else {
            return Ok(());
        };
        let burst =
            std::num::NonZeroU32::new(per_minute.min(self.burst.max(1))).expect("at least 1");
        let limiter = {
            let mut buckets = self.projects.lock().expect("not poisoned");
            match buckets.get(&project) {
                Some((r, l)) if *r == per_minute => l.clone(),
                _ => {
                    let l = std::sync::Arc::new(governor::RateLimiter::direct(
                        governor::Quota::per_minute(rate).allow_burst(burst),
                    ));
                    buckets.insert(project, (per_minute, l.clone()));
                    l
                }
            }
        };
        let share = self.processes.load(std::sync::atomic::Ordering::Relaxed);
        let cells = std::num::NonZeroU32::new(share.min(burst.get()).max(1)).expect("at least 1");
        match limiter.check_n(cells).unwrap_or(Ok(())) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                use governor::clock::Clock;
                let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                let secs = wait.as_secs_f64().ceil() as u64;
                Err(ApiError::TooManyRequestsFor(
                    secs,
                    format!(
                        "too many requests: the project's limit of {per_minute} requests a \
                         minute (limits.requests_per_minute, for all its callers together) is \
                         reached; slow down and retry after {} s",
                        secs.max(1)
                    ),
                ))
            }
        }
    }

    pub fn token_configured(&self) -> bool {
        self.token_hash.is_some()
    }

    /// A key or a person now exists: this process stops being open at once.
    pub(crate) fn credential_created(&self) {
        *self.keys_exist.lock().expect("not poisoned") = Some((true, Instant::now()));
    }

    /// Whether credentials are checked at all.
    pub async fn auth_required(&self, db: &sandbox_agents_store::Db) -> Result<bool, ApiError> {
        if self.token_configured() {
            return Ok(true);
        }
        let cached = *self.keys_exist.lock().expect("not poisoned");
        if let Some((exist, at)) = cached {
            // Once keys exist they are rarely all deleted: trust "yes" longer than "no" (the
            // safe direction: a process stays closed a little longer, never open).
            let ttl = if exist {
                OPEN_MODE_TTL * 60
            } else {
                OPEN_MODE_TTL
            };
            if at.elapsed() < ttl {
                return Ok(exist);
            }
        }
        let exist = api_keys::any(db).await? || sandbox_agents_store::people::any(db).await?;
        *self.keys_exist.lock().expect("not poisoned") = Some((exist, Instant::now()));
        Ok(exist)
    }

    /// Whether an `Authorization` value carries a credential of this server: an API key
    /// (valid or not: its prefix says it is ours) or the shared token. The preview proxy
    /// never forwards those to sandbox code.
    pub fn is_our_credential(&self, authorization: &str) -> bool {
        // Whatever the scheme or the whitespace: anything that names an API key, or any word
        // that is the shared token.
        authorization.contains(tokens::KEY_PREFIX)
            || self.token_hash.is_some_and(|expected| {
                authorization
                    .split_ascii_whitespace()
                    .any(|word| bool::from(tokens::digest(word).ct_eq(&expected)))
            })
    }

    /// The principal behind `authorization` (the header's value, if any) or, without one, a
    /// browser session cookie.
    pub async fn authenticate(
        &self,
        db: &sandbox_agents_store::Db,
        authorization: Option<&str>,
        session_cookie: Option<&str>,
    ) -> Result<Principal, ApiError> {
        let bearer = authorization.and_then(|h| {
            let (scheme, rest) = h.trim().split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| rest.trim())
        });
        if let Some(token) = bearer.filter(|t| !t.is_empty()) {
            if token.starts_with(tokens::KEY_PREFIX) {
                return self.api_key(db, token).await;
            }
            if let Some(expected) = &self.token_hash {
                if bool::from(tokens::digest(token).ct_eq(expected)) {
                    return Ok(Principal::Token);
                }
            }
        }
        if bearer.is_none() {
            if let Some(token) = session_cookie {
                if let Some(p) = person_of_session(db, token).await? {
                    return Ok(p);
                }
            }
        }
        if !self.auth_required(db).await? {
            return Ok(Principal::Open);
        }
        Ok(Principal::Anonymous {
            reason: if bearer.is_some() {
                "the credential is not accepted"
            } else {
                "a credential is required: send Authorization: Bearer <API key or token>"
            },
        })
    }

    async fn api_key(
        &self,
        db: &sandbox_agents_store::Db,
        key: &str,
    ) -> Result<Principal, ApiError> {
        let Some(k) = api_keys::by_hash(db, &tokens::digest(key)).await? else {
            return Ok(Principal::Anonymous {
                reason: "the API key is not accepted",
            });
        };
        if !k.is_active(time::OffsetDateTime::now_utc()) {
            return Ok(Principal::Anonymous {
                reason: "the API key is revoked or expired",
            });
        }
        self.note_use(db, k.id);
        Ok(Principal::ApiKey {
            id: k.id,
            name: k.name,
            project: k.project_id.map(ProjectId),
        })
    }

    /// Writes `last_used_at` in the background, at most every [`TOUCH_EVERY`] per key.
    fn note_use(&self, db: &sandbox_agents_store::Db, id: Uuid) {
        {
            let mut touched = self.touched.lock().expect("not poisoned");
            if touched.get(&id).is_some_and(|t| t.elapsed() < TOUCH_EVERY) {
                return;
            }
            touched.insert(id, Instant::now());
        }
        let db = db.clone();
        tokio::spawn(async move {
            if let Err(e) = api_keys::touch(&db, &[id]).await {
                tracing::debug!(key.id = %id, error = %e, "could not record an API key's use");
            }
        });
    }
}

/// The person behind a browser session's secret, with their memberships.
pub async fn person_of_session(
    db: &sandbox_agents_store::Db,
    token: &str,
) -> Result<Option<Principal>, ApiError> {
    let Some(p) = people::by_session(db, &tokens::digest(token)).await? else {
        return Ok(None);
    };
    let projects = memberships::of_person(db, p.id).await?;
    Ok(Some(Principal::Person {
        id: p.id,
        email: p.email,
        operator: p.operator,
        projects,
    }))
}

/// 403 unless the caller is an operator. Where no operator path exists (no shared token:
/// keys were made in open mode), an unbound API key acts as one, or nobody could manage keys.
pub fn require_operator(p: &Principal, auth: &Auth) -> Result<(), ApiError> {
    match p {
        Principal::Open | Principal::Token | Principal::Person { operator: true, .. } => Ok(()),
        Principal::Person { .. } => Err(ApiError::Forbidden(
            "this is an operator action; ask an operator".into(),
        )),
        Principal::ApiKey { project: None, .. } if !auth.token_configured() => Ok(()),
        Principal::ApiKey { .. } => Err(ApiError::Forbidden(
            "this is an operator action; an API key may not do it".into(),
        )),
        Principal::Anonymous { reason } => Err(ApiError::Unauthorized((*reason).into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_over_its_budget_gets_a_429_with_retry_after() {
        let auth = Auth::new(None).with_rate_limit(Some(RateLimit {
            per_minute: 60,
            burst: 3,
        }));
        for _ in 0..3 {
            assert!(auth.check_rate("key:a").is_ok());
        }
        match auth.check_rate("key:a") {
            Err(ApiError::TooManyRequests(secs)) => assert!((1..=2).contains(&secs)),
            other => panic!("expected a 429, got {other:?}"),
        }
        assert!(
            auth.check_rate("key:b").is_ok(),
            "budgets are per credential"
        );
        assert!(
            Auth::new(None).check_rate("key:a").is_ok(),
            "no limit configured"
        );
    }

    #[test]
    fn the_budget_is_shared_by_the_processes_alive() {
        let auth = Auth::new(None).with_rate_limit(Some(RateLimit {
            per_minute: 60,
            burst: 6,
        }));
        // Three processes: each request here takes three cells, so two fit in the burst.
        auth.set_processes(3);
        assert!(auth.check_rate("key:a").is_ok());
        assert!(auth.check_rate("key:a").is_ok());
        assert!(matches!(
            auth.check_rate("key:a"),
            Err(ApiError::TooManyRequests(_))
        ));
        // More processes than the burst: one request per refill still goes through.
        auth.set_processes(100);
        assert!(auth.check_rate("key:b").is_ok());
        assert!(auth.check_rate("key:b").is_err());
        // Back to one: the whole burst.
        auth.set_processes(0);
        for _ in 0..6 {
            assert!(auth.check_rate("key:c").is_ok());
        }
        assert!(auth.check_rate("key:c").is_err());
    }

    #[test]
    fn a_project_with_its_own_rate_has_one_bucket_for_all_its_callers() {
        let auth = Auth::new(None).with_rate_limit(Some(RateLimit {
            per_minute: 6000,
            burst: 500,
        }));
        let (a, b) = (ProjectId(Uuid::from_u128(1)), ProjectId(Uuid::from_u128(2)));
        // A burst of up to the project's rate (under the deployment's burst), then a 429
        // that names the project's limit.
        for _ in 0..3 {
            assert!(auth.check_project_rate(a, 3).is_ok());
        }
        match auth.check_project_rate(a, 3) {
            Err(ApiError::TooManyRequestsFor(secs, detail)) => {
                assert!((1..=20).contains(&secs), "{secs}");
                assert!(detail.contains("limits.requests_per_minute"), "{detail}");
            }
            other => panic!("expected a 429, got {other:?}"),
        }
        assert!(
            auth.check_project_rate(b, 3).is_ok(),
            "buckets are per project"
        );
        // A changed rate starts a new bucket.
        assert!(auth.check_project_rate(a, 4).is_ok());
        assert!(auth.check_project_rate(a, 0).is_ok(), "0 is no limit");
    }

    #[test]
    fn operators_are_the_token_and_open_mode() {
        let with_token = Auth::new(Some("s3cret"));
        let key = Principal::ApiKey {
            id: Uuid::nil(),
            name: "k".into(),
            project: None,
        };
        assert!(require_operator(&Principal::Token, &with_token).is_ok());
        assert!(matches!(
            require_operator(&key, &with_token),
            Err(ApiError::Forbidden(_))
        ));
        assert!(require_operator(&key, &Auth::new(None)).is_ok());
        let bound = Principal::ApiKey {
            id: Uuid::nil(),
            name: "k".into(),
            project: Some(ProjectId(Uuid::nil())),
        };
        assert!(require_operator(&bound, &Auth::new(None)).is_err());
    }
}
