//! The server's own account pages, which `Me` points at: `/login`, `/logout`, `/recovery`
//! (`?code=` from a recovery link) and `/settings`. Plain HTML forms that one script of ours
//! (`/_account/account.js`, no inline script, so the pages' CSP forbids any) posts as JSON to
//! the API (`/api/auth/*`, `/api/me/profile`) from the same origin, with the header that
//! cookie sessions need for changes. No third-party assets. Their files live under
//! `/_account/`, which the web UI's `/assets/` (Vite's) can never collide with.
//!
//! `?next=/some/path` on a page is where it goes once done (the web UI sends people to
//! `/login?next=<where they were>`); only a path on this origin is followed.

use axum::http::header;
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use axum::Router;

/// The pages' look, shared with the UI's placeholder: the system's fonts and its light or
/// dark scheme.
const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1c2024;--muted:#60646c;--bg:#f9f9fb;--card:#fff;\
--line:#d9d9e0;--accent:#3e63dd;--err:#ce2c31}\
@media (prefers-color-scheme:dark){:root{--fg:#edeef0;--muted:#b0b4ba;--bg:#111113;\
--card:#18191b;--line:#363a3f;--accent:#8da4ef;--err:#ff9592}}\
body{font:15px/1.5 system-ui,-apple-system,'Segoe UI',sans-serif;color:var(--fg);\
background:var(--bg);margin:0;padding:4rem 1rem}\
main{max-width:24rem;margin:0 auto;background:var(--card);border:1px solid var(--line);\
border-radius:12px;padding:1.5rem 1.75rem}\
.brand{font-weight:600;color:var(--muted);font-size:.85rem;letter-spacing:.02em;margin:0}\
h1{font-size:1.35rem;margin:.25rem 0 1rem}\
label{display:block;margin:.9rem 0 .25rem;font-size:.9rem;color:var(--muted)}\
input{width:100%;padding:.5rem .6rem;box-sizing:border-box;font:inherit;color:inherit;\
background:transparent;border:1px solid var(--line);border-radius:6px}\
input:focus{outline:2px solid var(--accent);outline-offset:1px}\
button{margin-top:1.25rem;padding:.5rem 1rem;font:inherit;font-weight:500;color:#fff;\
background:var(--accent);border:0;border-radius:6px;cursor:pointer}\
a{color:var(--accent)}pre,code{font:13px ui-monospace,monospace}\
pre{background:var(--bg);border:1px solid var(--line);border-radius:6px;padding:.6rem;overflow:auto}\
#msg{margin-top:1rem;color:var(--err)}\
";

/// Fills the email or recovery code (never a password) from the query, then sends the fields
/// as JSON to the form's `data-action` with `data-method`, and goes to `data-next` on success.
/// The form itself posts to a path that does nothing, so that a page whose script failed never
/// puts what was typed into a URL.
const SCRIPT: &str = r#"const f = document.getElementById('f');
const q = new URLSearchParams(location.search);
for (const k of ['email', 'code']) { const i = f.elements.namedItem(k); if (i && q.has(k)) i.value = q.get(k); }
const n = q.get('next') || '';
const next = /^\/(?![\/\\])/.test(n) ? n : f.dataset.next;
f.onsubmit = async (e) => {
  e.preventDefault();
  const body = Object.fromEntries(new FormData(f));
  const r = await fetch(f.dataset.action, {method: f.dataset.method, credentials: 'same-origin',
    headers: {'content-type': 'application/json', 'x-requested-with': 'sandbox-agents'},
    body: JSON.stringify(body)});
  if (r.ok) { location.href = next; return; }
  const d = await r.json().catch(() => ({}));
  document.getElementById('msg').textContent = typeof d.detail === 'string' ? d.detail : (d.detail || []).map(x => x.msg).join('; ') || r.statusText;
};
"#;

/// A page with a form whose fields are posted as JSON to `action`, then goes to `next`.
fn page(title: &str, fields: &str, action: &str, method: &str, next: &str) -> Html<String> {
    Html(format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>{title} · Sandbox Agents</title>
<meta name="viewport" content="width=device-width,initial-scale=1"><link rel="stylesheet" href="/_account/account.css"></head>
<body><main><p class="brand">Sandbox Agents</p><h1>{title}</h1><form id="f" method="post" action="{action}" data-action="{action}" data-method="{method}" data-next="{next}">{fields}<button>{title}</button></form><p id="msg"></p></main>
<script src="/_account/account.js"></script></body></html>"#
    ))
}

/// One of the pages' files, revalidated on every load (they change with the binary).
fn file(content_type: &'static str, body: &'static str) -> axum::response::Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/_account/account.js",
            get(|| async { file("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/_account/account.css",
            get(|| async { file("text/css; charset=utf-8", STYLE) }),
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
                    "/",
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
                    "/",
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
