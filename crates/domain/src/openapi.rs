//! Schemas for the OpenAPI document where a field's rule cannot be written as a `#[schema]`
//! attribute (a range on every item of a list, a closed set computed from the catalogue).
//! They describe what the parsing and validation code next to each type enforces, and change
//! nothing on the wire. Used with `#[schema(schema_with = ...)]`, which replaces the field's
//! whole schema, so each carries its field's description too.

use crate::event::subscribable;
use utoipa::openapi::schema::{
    ArrayBuilder, KnownFormat, ObjectBuilder, OneOfBuilder, SchemaFormat, SchemaType, Type,
};
use utoipa::openapi::{RefOr, Schema};

/// A TCP port as `exposed_ports` takes it: 1 to 65535.
fn port() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
        .minimum(Some(1))
        .maximum(Some(65535))
}

/// An agent's `exposed_ports`: ports the sandbox publishes (on loopback only) so that
/// previews can reach them. Stored sorted, without duplicates.
pub fn exposed_ports() -> RefOr<Schema> {
    ArrayBuilder::new()
        .items(port())
        .description(Some(
            "Ports inside the sandbox that sessions publish for previews \
             (`GET /api/sessions/{session_id}/ports/{port}`), each 1 to 65535. Stored sorted and \
             without duplicates. A session with exposed ports does not use the warm pool. \
             Cannot be null; send `[]` for none.",
        ))
        .into()
}

/// A skills bundle's `version`: a pinned version number, or the label `latest`.
pub fn bundle_version() -> RefOr<Schema> {
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
                .minimum(Some(0))
                .maximum(Some(i32::MAX))
                .description(Some("A pinned version of the bundle.")),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["latest"]))
                .description(Some("Follow every push to the bundle.")),
        )
        .default(Some(serde_json::json!("latest")))
        .description(Some(
            "Which version of the bundle to stage: a version number pins it, `\"latest\"` (the \
             default) follows every push. Any other string is a 422.",
        ))
        .into()
}

/// The subscribable event types: every stored type of the catalogue.
fn event_type() -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(subscribable().map(|t| t.as_str())))
}

const EVENT_TYPES: &str = "Event types to deliver, from `GET /api/webhooks/event-types` (every \
     stored type; `agent.text_delta` and `stream_gap` are never delivered and are refused). \
     Duplicates are folded. Empty means every type.";

/// `event_types` on a webhook create: left out or `[]` means every type.
pub fn event_types() -> RefOr<Schema> {
    ArrayBuilder::new()
        .items(event_type())
        .description(Some(EVENT_TYPES))
        .into()
}

/// `event_types` on a webhook PATCH: null means every type too.
pub fn event_types_patch() -> RefOr<Schema> {
    ArrayBuilder::new()
        .schema_type(SchemaType::from_iter([Type::Array, Type::Null]))
        .items(event_type())
        .description(Some(format!(
            "{EVENT_TYPES} Null means every type as well (the same as `[]`); absent leaves the \
             list as it is."
        )))
        .into()
}

/// A field error's `loc`: the path to the offending field, names and list indexes.
pub fn field_error_loc() -> RefOr<Schema> {
    ArrayBuilder::new()
        .items(
            OneOfBuilder::new()
                .item(ObjectBuilder::new().schema_type(Type::String))
                .item(ObjectBuilder::new().schema_type(Type::Integer)),
        )
        .description(Some(
            "Where the error is: the part of the request (`body`, `query`, `header`), then the \
             field names and list indexes down to the field, e.g. \
             `[\"body\", \"manifest\", \"entries\", \"a.txt\", \"kind\"]` or \
             `[\"body\", \"client_tools\", 0, \"name\"]`.",
        ))
        .into()
}

/// A field error's `input`: whatever JSON value was sent there.
pub fn field_error_input() -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(SchemaType::AnyValue)
        .description(Some(
            "The offending input, when there is one and it may be shown (never a secret's).",
        ))
        .into()
}

/// A usage's token counts: `input_tokens`, `output_tokens`, `total_tokens` and `requests`
/// (model calls), each a whole number (`agent::usage::tokens` writes them).
fn usage_tokens() -> ObjectBuilder {
    let count = |description: &str| {
        ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int64)))
            .minimum(Some(0))
            .description(Some(description))
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("input_tokens", count("Tokens the model read"))
        .property("output_tokens", count("Tokens the model wrote"))
        .property("total_tokens", count("Both"))
        .property("requests", count("Model calls"))
        .property(
            "cost_usd",
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0))
                .description(Some(
                    "What the priced model calls cost, in US dollars: the provider's figure for \
                     each call (LiteLLM's), else the model catalogue's per-token prices. Calls \
                     with neither are not in it: `unpriced_requests` counts them",
                )),
        )
        .property(
            "unpriced_requests",
            count("Model calls no price was found for, so not in `cost_usd` (0: every call is priced)"),
        )
}

/// A usage split by name (a model's, or an agent's slug): the tokens of each.
fn usage_split(description: &str) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(usage_tokens()))
        .description(Some(description))
}

/// What a turn or a whole conversation spent (`agent::usage`): the tokens, `active_seconds`
/// (wall-clock seconds turns were working), the same tokens `by_model` and `by_agent`, and
/// `memory` (the part memory consolidation spent). Every key may be missing: `{}` before the
/// first turn.
fn usage(description: &str) -> RefOr<Schema> {
    usage_tokens()
        .property(
            "active_seconds",
            ObjectBuilder::new()
                .schema_type(Type::Number)
                .minimum(Some(0))
                .description(Some("Seconds turns were working")),
        )
        .property("by_model", usage_split("The tokens by model"))
        .property(
            "by_agent",
            usage_split("The tokens by agent (the session's, or a subagent's slug)"),
        )
        .property(
            "memory",
            usage_tokens().description(Some(
                "The part of the tokens memory consolidation spent (included in the totals)",
            )),
        )
        .description(Some(description))
        .into()
}

/// `Session.usage`.
pub fn session_usage() -> RefOr<Schema> {
    usage(
        "What the whole conversation has spent so far: tokens, requests and `active_seconds`, \
         the same split `by_model` and `by_agent`, and `memory` (consolidation's part). `{}` \
         before the first turn.",
    )
}

/// `Run.usage`.
pub fn run_usage() -> RefOr<Schema> {
    usage("What this turn spent, in the shape of `Session.usage`.")
}

#[cfg(test)]
mod tests {
    //! The document's rules must accept exactly what the validators accept. Each rule is
    //! read back out of the generated schema (pattern, lengths in characters) and compared
    //! with the validator on inputs chosen to sit on every edge: blanks of every kind of
    //! white space, control characters, lengths one either side of the limits, option-like
    //! and shell-like strings.
    use super::*;
    use crate::validation::Violations;
    use serde_json::Value;
    use utoipa::PartialSchema;

    fn property<T: PartialSchema>(path: &[&str]) -> Value {
        let mut v = serde_json::to_value(T::schema()).unwrap();
        for p in path {
            v = v["properties"][*p].take();
        }
        assert!(v.is_object(), "no schema at {path:?}");
        v
    }

    /// What JSON Schema says of `s`: the pattern (an unanchored search), and the lengths in
    /// code points.
    fn schema_accepts(schema: &Value, s: &str) -> bool {
        let n = s.chars().count() as u64;
        let pattern_ok = schema["pattern"].as_str().is_none_or(|p| {
            regex::Regex::new(p)
                .unwrap_or_else(|e| panic!("{p}: {e}"))
                .is_match(s)
        });
        pattern_ok
            && schema["minLength"].as_u64().is_none_or(|m| n >= m)
            && schema["maxLength"].as_u64().is_none_or(|m| n <= m)
    }

    fn corpus() -> Vec<String> {
        let mut c: Vec<String> = [
            "",
            " ",
            "  ",
            "\t",
            "\n",
            "\r\n",
            "\u{b}",
            "\u{c}",
            "\u{85}",
            "\u{a0}",
            "\u{1680}",
            "\u{2000}",
            "\u{200a}",
            "\u{200b}",
            "\u{2028}",
            "\u{2029}",
            "\u{202f}",
            "\u{205f}",
            "\u{3000}",
            "\u{feff}",
            "\u{180e}",
            "\0",
            "a\0b",
            "\u{7f}",
            "\u{9f}",
            "a\u{1}b",
            "a",
            " a ",
            "a b",
            "a\nb",
            "Ä",
            "ünïcode",
            "日本",
            "😀",
            "-",
            "-lead",
            "lead-",
            "9lives",
            "Upper",
            "renewal-analyst",
            "has space",
            "a/b",
            "a.b",
            "_x",
            "x_",
            "1a",
            "A_1",
            "OPENAI_API_KEY",
            "has-dash",
            "o/r",
            "o/r.git",
            "/srv/git/r.git",
            "~u/r",
            "o/r+x@y:z",
            "o/r; id",
            "o/r$(id)",
            "o/'r'",
            "o/r\t",
            "--upload-pack=x",
            "-u",
            "github.com",
            "git@github.com",
            "deploy@git.example.com",
            "-git@github.com",
            "git@-oProxyCommand=id",
            "-oProxyCommand=id",
            "github.com:22",
            "github.com:0",
            "github.com:00",
            "github.com:022",
            "github.com:65535",
            "github.com:065535",
            "github.com:65536",
            "github.com:99999",
            "github.com:22x",
            "github.com:",
            "root@127.0.0.1:2222",
            "[::1]",
            "[::1]:22",
            "[fe80::1]",
            "[::1",
            "[zz::1]",
            "[]",
            "[::1]x",
            "a@b@c",
            ".github.com",
            "github.com.",
            "git hub.com",
            "github.com\n",
            "_@h",
            ".@h",
            "@h",
            "u@",
            "u@[::1]:65535",
            "http://x",
            "https://x",
            "HTTP://x",
            "HtTpS://example.com/hook?a=b",
            "http://",
            "https:/x",
            "ftp://x",
            "example.com",
            "http://exa mple.com",
            "http://x\u{3000}y",
            "http://x\u{feff}",
            "http://x\u{85}",
            " https://x",
            "admin",
            "member",
            "Admin",
            "owner",
            "admin ",
            "deploy key (ci)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for n in [
            62, 63, 64, 65, 127, 128, 129, 199, 200, 201, 299, 300, 301, 511, 512, 513,
        ] {
            c.push("a".repeat(n));
            c.push("é".repeat(n));
            c.push(format!("x@{}", "h".repeat(n - 2)));
            c.push(format!("{} ", "a".repeat(n - 1)));
        }
        c
    }

    fn agree(schema: &Value, what: &str, valid: impl Fn(&str) -> bool) {
        for s in corpus() {
            assert_eq!(
                schema_accepts(schema, &s),
                valid(&s),
                "{what}: the document and the validator disagree on {s:?}"
            );
        }
    }

    fn no_violation(check: impl Fn(&mut Violations)) -> bool {
        let mut v = Violations::new();
        check(&mut v);
        v.is_empty()
    }

    #[test]
    fn agent_names_and_optional_strings_are_not_blank_as_the_validator_reads_it() {
        use crate::agent::{AgentCreate, AgentPatch};
        let not_blank = |s: &str| !s.trim().is_empty();
        agree(&property::<AgentCreate>(&["model"]), "model", not_blank);
        agree(&property::<AgentPatch>(&["image"]), "image", not_blank);
        agree(&property::<AgentCreate>(&["name"]), "name", |s| {
            not_blank(s) && s.chars().count() <= crate::agent::MAX_NAME_LEN
        });
    }

    #[test]
    fn slugs_match_the_slug_rule_bar_the_uuid_shape() {
        use crate::agent::AgentCreate;
        use crate::identity::ProjectCreate;
        let slug = |s: &str| crate::Slug::parse(s).is_ok();
        agree(&property::<AgentCreate>(&["slug"]), "agent slug", slug);
        agree(&property::<ProjectCreate>(&["slug"]), "project slug", |s| {
            s.is_empty() || slug(s)
        });
    }

    #[test]
    fn tool_and_variable_names_match_their_checks() {
        use crate::tools::{is_tool_name, ClientTool, SecretBinding};
        agree(
            &property::<ClientTool>(&["name"]),
            "tool name",
            is_tool_name,
        );
        agree(
            &property::<SecretBinding>(&["env"]),
            "env",
            // "" is an inject binding's (validated with the binding's other fields).
            |s| s.is_empty() || crate::manifest::is_env_name(s),
        );
        agree(&property::<SecretBinding>(&["secret"]), "secret", |s| {
            !s.trim().is_empty()
        });
    }

    #[test]
    fn secret_names_and_values_match_their_checks() {
        use crate::secret::{check_name, check_value, SecretCreate, SecretValue};
        agree(&property::<SecretCreate>(&["name"]), "secret name", |s| {
            no_violation(|v| check_name(v, s))
        });
        // The 32 KiB bound is in bytes, which JSON Schema cannot say; the corpus stays under it.
        agree(&property::<SecretCreate>(&["value"]), "secret value", |s| {
            no_violation(|v| check_value(v, &SecretValue(s.to_owned())))
        });
    }

    #[test]
    fn git_key_names_repositories_and_hosts_match_the_strict_parser() {
        use crate::git_key::{check_name, GitKeyCreate, GitKeyTestRequest, GitRemote};
        agree(&property::<GitKeyCreate>(&["name"]), "git key name", |s| {
            no_violation(|v| check_name(v, s))
        });
        let loc_ok = |repo: &str, host: &str, field: &str| {
            let mut v = Violations::new();
            GitRemote::parse(&mut v, repo, host);
            v.into_result()
                .err()
                .is_none_or(|errs| !errs.iter().any(|e| e.loc[1] == field))
        };
        agree(&property::<GitKeyTestRequest>(&["repo"]), "repo", |s| {
            loc_ok(s, "github.com", "repo")
        });
        agree(&property::<GitKeyTestRequest>(&["host"]), "host", |s| {
            loc_ok("o/r", s, "host")
        });
    }

    #[test]
    fn webhook_names_and_urls_match_their_checks() {
        use crate::webhook::{check_name, check_url_shape, WebhookCreate, WebhookPatch};
        agree(&property::<WebhookCreate>(&["name"]), "webhook name", |s| {
            no_violation(|v| check_name(v, s))
        });
        // The 2048 bound is in bytes; the corpus stays under it.
        for schema in [
            property::<WebhookCreate>(&["url"]),
            property::<WebhookPatch>(&["url"]),
        ] {
            agree(&schema, "webhook url", |s| {
                no_violation(|v| {
                    check_url_shape(v, s);
                })
            });
        }
    }

    #[test]
    fn a_member_role_is_admin_or_member() {
        use crate::identity::MemberCreate;
        agree(&property::<MemberCreate>(&["role"]), "role", |s| {
            matches!(s, "admin" | "member")
        });
    }

    #[test]
    fn the_event_type_enum_is_the_subscribable_set() {
        let json = serde_json::to_value(event_types()).unwrap();
        let listed = json["items"]["enum"].as_array().unwrap();
        assert_eq!(listed.len(), subscribable().count());
        for t in subscribable() {
            assert!(listed.contains(&Value::from(t.as_str())));
        }
        assert!(!listed.contains(&"agent.text_delta".into()));
    }
}
