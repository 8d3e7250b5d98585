//! Who is calling (API.md §1.2). Every `/api` request is authenticated by [`layer`] before
//! its handler runs; handlers read the result with the [`Principal`] extractor.
//!
//! Credentials, all `Authorization: Bearer`: API keys (`ak_…`; only their SHA-256 is stored,
//! looked up by it), and the deployment's shared token (`SANDBOX_AGENTS_TOKEN`, compared in
//! constant time). **Open mode** only while neither is configured: no shared token and no API
//! key in the database (revoked keys count: revoking the last key does not reopen the
//! deployment; deleting every key does). Public without a credential: `GET /api/health` and
//! `GET /api/me` (which says whether credentials are checked).
//!
//! Rate limits: each credential (an API key, the shared token; callers without one by client
//! address) gets a token bucket in this process; over it, a 429 with `Retry-After` before the
//! handler runs, so a 429 never did anything.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sandbox_agents_domain::ProjectId;
use sandbox_agents_store::api_keys;
use sha2::{Digest, Sha256};
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
/// The prefix every API key starts with.
pub const KEY_PREFIX: &str = "ak_";
/// Sign-in attempts allowed per minute for one account, and for one address.
const SIGN_IN_PER_MINUTE: u32 = 10;
/// How many checks between prunes of idle rate-limit buckets.
const PRUNE_EVERY: u64 = 4096;

type KeyedLimiter = governor::DefaultKeyedRateLimiter<String>;

/// A per-credential request budget: `per_minute` sustained, bursts of `burst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    pub per_minute: u32,
    pub burst: u32,
}

/// The caller.
#[derive(Clone, Debug, PartialEq)]
pub enum Principal {
    /// Open mode: nothing is configured, every caller acts as an operator.
    Open,
    /// The deployment's shared token: an operator.
    Token,
    /// An API key, bound to one project or (made by an operator) to none.
    ApiKey {
        id: Uuid,
        name: String,
        project: Option<ProjectId>,
    },
    /// A person signed in to the web UI (a session cookie), with their memberships.
    Person {
        id: Uuid,
        email: String,
        operator: bool,
        projects: Vec<(ProjectId, String)>,
    },
    /// No credential, or one that is not accepted (only public routes let it through).
    Anonymous { reason: &'static str },
}

impl Principal {
    /// Operators manage keys, projects and people: the shared token, operator people, and
    /// anyone in open mode.
    pub fn is_operator(&self) -> bool {
        matches!(
            self,
            Principal::Open | Principal::Token | Principal::Person { operator: true, .. }
        )
    }

    /// A person's role in `project`, if they have one.
    pub fn role_in(&self, project: ProjectId) -> Option<&str> {
        match self {
            Principal::Person { projects, .. } => projects
                .iter()
                .find(|(p, _)| *p == project)
                .map(|(_, r)| r.as_str()),
            _ => None,
        }
    }

    /// `Me.kind` (API.md §9.5).
    pub fn kind(&self) -> Option<&'static str> {
        match self {
            Principal::Token => Some("token"),
            Principal::ApiKey { .. } => Some("api_key"),
            Principal::Person { .. } => Some("user"),
            Principal::Open | Principal::Anonymous { .. } => None,
        }
    }

    /// Who made something, as recorded on it (`created_by`).
    pub fn subject(&self) -> Option<String> {
        match self {
            Principal::Token => Some("token".into()),
            Principal::ApiKey { id, .. } | Principal::Person { id, .. } => Some(id.to_string()),
            Principal::Open => Some("open".into()),
            Principal::Anonymous { .. } => None,
        }
    }
}

/// The authenticator: the shared token's hash and this process's small caches.
pub struct Auth {
    token_hash: Option<[u8; 32]>,
    keys_exist: Mutex<Option<(bool, Instant)>>,
    touched: Mutex<HashMap<Uuid, Instant>>,
    limiter: Option<KeyedLimiter>,
    checks: std::sync::atomic::AtomicU64,
    /// Sign-in attempts, per account and per address (always on).
    sign_in: KeyedLimiter,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth")
            .field("token", &self.token_hash.map(|_| "***"))
            .field("rate_limited", &self.limiter.is_some())
            .finish()
    }
}

fn sha256(s: &str) -> [u8; 32] {
    Sha256::digest(s.as_bytes()).into()
}

/// The stored hash of an API key.
pub fn key_hash(key: &str) -> [u8; 32] {
    sha256(key)
}

/// A new API key: `ak_` and 32 random bytes in hex; returns it with its display prefix.
pub fn new_key() -> Result<(String, String), ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::getrandom(&mut bytes)
        .map_err(|e| ApiError::Internal(anyhow::anyhow!("no randomness for an API key: {e}")))?;
    let key = format!("{KEY_PREFIX}{}", hex::encode(bytes));
    let prefix = key[..KEY_PREFIX.len() + 8].to_owned();
    Ok((key, prefix))
}

impl Auth {
    pub fn new(shared_token: Option<&str>) -> Self {
        Auth {
            token_hash: shared_token.filter(|t| !t.is_empty()).map(sha256),
            keys_exist: Mutex::new(None),
            touched: Mutex::new(HashMap::new()),
            limiter: None,
            checks: Default::default(),
            sign_in: governor::RateLimiter::keyed(
                governor::Quota::per_minute(
                    std::num::NonZeroU32::new(SIGN_IN_PER_MINUTE).expect("non-zero"),
                )
                .allow_burst(std::num::NonZeroU32::new(SIGN_IN_PER_MINUTE).expect("non-zero")),
            ),
        }
    }

    /// Limits each credential's request rate (None or a zero rate: unlimited).
    pub fn with_rate_limit(mut self, limit: Option<RateLimit>) -> Self {
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

    /// Counts one request of `who`; the 429 to answer when it is over its budget.
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
        match limiter.check_key(&who.to_owned()) {
            Ok(()) => Ok(()),
            Err(not_until) => {
                use governor::clock::Clock;
                let wait = not_until.wait_time_from(governor::clock::DefaultClock::default().now());
                Err(ApiError::TooManyRequests(wait.as_secs_f64().ceil() as u64))
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
        let Some((scheme, rest)) = authorization.trim().split_once(' ') else {
            return false;
        };
        let token = rest.trim();
        scheme.eq_ignore_ascii_case("bearer")
            && (token.starts_with(KEY_PREFIX)
                || self
                    .token_hash
                    .is_some_and(|expected| bool::from(sha256(token).ct_eq(&expected))))
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
            if token.starts_with(KEY_PREFIX) {
                return self.api_key(db, token).await;
            }
            if let Some(expected) = &self.token_hash {
                if bool::from(sha256(token).ct_eq(expected)) {
                    return Ok(Principal::Token);
                }
            }
        }
        if bearer.is_none() {
            if let Some(token) = session_cookie {
                if let Some(p) = crate::people::person_of_session(db, token).await? {
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
        let Some(k) = api_keys::by_hash(db, &key_hash(key)).await? else {
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

/// The header that cookie-authenticated changes must carry (any value).
pub const CSRF_HEADER: &str = "x-requested-with";

/// Routes anyone may call.
fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/api/health" | "/api/me" | "/api/auth/login" | "/api/auth/logout" | "/api/auth/recovery"
    )
}

/// Authenticates every `/api` request; anything but a public route needs a principal.
pub async fn layer(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let path = req.uri().path().to_owned();
    if !path.starts_with("/api/") && path != "/api" {
        return next.run(req).await;
    }
    let public = is_public(&path);
    let header = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let cookie = crate::people::session_cookie(req.headers());
    let principal = match st
        .settings
        .auth
        .authenticate(&st.db, header.as_deref(), cookie.as_deref())
        .await
    {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    if let Principal::Anonymous { reason } = &principal {
        if !public {
            return ApiError::Unauthorized((*reason).into()).into_response();
        }
    }
    // A browser sends the session cookie with requests other sites make it send; a custom
    // header it sends only for pages of this origin (anything else needs a CORS preflight,
    // which this server never grants). People are authenticated by the cookie alone.
    if matches!(principal, Principal::Person { .. })
        && crate::guard::changes_state(req.method())
        && !req.headers().contains_key(CSRF_HEADER)
    {
        return ApiError::Forbidden(format!(
            "a change made with a browser session must carry the {CSRF_HEADER} header \
             (the web UI sends it; pages of other sites cannot)"
        ))
        .into_response();
    }
    if path != "/api/health" {
        let who = match &principal {
            Principal::ApiKey { id, .. } => format!("key:{id}"),
            Principal::Person { id, .. } => format!("person:{id}"),
            Principal::Token => "token".to_owned(),
            Principal::Open | Principal::Anonymous { .. } => match req
                .extensions()
                .get::<axum::extract::ConnectInfo<
                std::net::SocketAddr,
            >>() {
                Some(c) => format!("ip:{}", c.0.ip()),
                None => "ip:unknown".to_owned(),
            },
        };
        if let Err(e) = st.settings.auth.check_rate(&who) {
            tracing::info!(who = %who, "rate limited");
            return e.into_response();
        }
    }
    tracing::Span::current().record("principal", tracing::field::debug(principal.kind()));
    req.extensions_mut().insert(principal);
    next.run(req).await
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| ApiError::Internal(anyhow::anyhow!("the auth layer did not run")))
    }
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
    fn keys_have_their_prefix_and_enough_randomness() {
        let (a, pa) = new_key().unwrap();
        let (b, _) = new_key().unwrap();
        assert!(a.starts_with("ak_") && a.len() == 3 + 64);
        assert_eq!(pa, &a[..11]);
        assert_ne!(a, b);
    }

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
