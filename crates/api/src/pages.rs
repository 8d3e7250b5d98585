//! The server's own account pages, which `Me` points at: `/login`, `/logout`, `/recovery`
//! (`?code=` from a recovery link) and `/settings`. Plain HTML forms that one script of ours
//! (`/assets/account.js`, no inline script, so the pages' CSP forbids any) posts as JSON to
//! the API (`/api/auth/*`, `/api/me/profile`) from the same origin, with the header that
//! cookie sessions need for changes. No third-party assets.

use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;

const STYLE: &str =
    "body{font:16px system-ui,sans-serif;max-width:26rem;margin:4rem auto;padding:0 1rem}\
label{display:block;margin:.8rem 0 .2rem}input{width:100%;padding:.4rem;box-sizing:border-box}\
button{margin-top:1rem;padding:.5rem 1rem}#msg{margin-top:1rem;color:#a00}";

/// Fills the email or recovery code (never a password) from the query, then sends the fields
/// as JSON to the form's `data-action` with `data-method`, and goes to `data-next` on success.
/// The form itself posts to a path that does nothing, so that a page whose script failed never
/// puts what was typed into a URL.
const SCRIPT: &str = r#"const f = document.getElementById('f');
const q = new URLSearchParams(location.search);
for (const k of ['email', 'code']) { const i = f.elements.namedItem(k); if (i && q.has(k)) i.value = q.get(k); }
f.onsubmit = async (e) => {
  e.preventDefault();
  const body = Object.fromEntries(new FormData(f));
  const r = await fetch(f.dataset.action, {method: f.dataset.method, credentials: 'same-origin',
    headers: {'content-type': 'application/json', 'x-requested-with': 'sandbox-agents'},
    body: JSON.stringify(body)});
  if (r.ok) { location.href = f.dataset.next; return; }
  const d = await r.json().catch(() => ({}));
  document.getElementById('msg').textContent = typeof d.detail === 'string' ? d.detail : (d.detail || []).map(x => x.msg).join('; ') || r.statusText;
};
"#;

/// A page with a form whose fields are posted as JSON to `action`, then goes to `next`.
fn page(title: &str, fields: &str, action: &str, method: &str, next: &str) -> Html<String> {
    Html(format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>{title} · Sandbox Agents</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><style>{STYLE}</style></head>
<body><h1>{title}</h1><form id="f" method="post" action="{action}" data-action="{action}" data-method="{method}" data-next="{next}">{fields}<button>{title}</button></form><p id="msg"></p>
<script src="/assets/account.js"></script></body></html>"#
    ))
}

pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/assets/account.js",
            get(|| async {
                (
                    [
                        (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                        (header::CACHE_CONTROL, "no-cache"),
                    ],
                    SCRIPT,
                )
                    .into_response()
            }),
        )
        .route(
            "/login",
            get(|| async {
                page(
                    "Sign in",
                    r#"<label>Email<input name="email" type="email" autocomplete="username" required></label>
<label>Password<input name="password" type="password" autocomplete="current-password" required></label>"#,
                    "/api/auth/login",
                    "POST",
                    "/settings",
                )
            }),
        )
        .route(
            "/logout",
            get(|| async { page("Sign out", "", "/api/auth/logout", "POST", "/login") }),
        )
        .route(
            "/recovery",
            get(|| async {
                page(
                    "Set your password",
                    r#"<label>Recovery code<input name="code" required></label>
<label>New password (10 characters or more)<input name="password" type="password" autocomplete="new-password" minlength="10" required></label>"#,
                    "/api/auth/recovery",
                    "POST",
                    "/settings",
                )
            }),
        )
        .route(
            "/settings",
            get(|| async {
                page(
                    "Save",
                    r#"<label>Display name<input name="name"></label><p><a href="/logout">Sign out</a></p>"#,
                    "/api/me/profile",
                    "PATCH",
                    "/settings",
                )
            }),
        )
}
