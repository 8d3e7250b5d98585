//! Input rules in the OpenAPI document that `#[schema(...)]` attributes cannot carry: utoipa
//! takes only literal numbers there (`max_length = 4000`, never `max_length = MAX_LEN`), so a
//! rule written as an attribute is a second copy of the validator's constant that can drift
//! from it. Here each rule is written once, *with the constant the validator checks against*
//! (`agent::MAX_INSTRUCTIONS_LEN`, `sessions::terminal::MAX_TERMINAL_SIDE`, ...), and applied
//! to the generated document: changing a limit changes the check and the document together.
//!
//! A rule names a schema and a property (or an operation's query parameter); a name that no
//! longer exists panics when the document is built (so every test that builds it fails),
//! instead of the rule silently falling off. The API test `openapi_routes` checks that every
//! string, number and list of a request body or query has a rule.
//!
//! Integers a validator does not bound are documented with the range of the type they are
//! parsed into: a wider value is refused by the parser, so that range is the rule.

use sandbox_agents_domain::{
    agent, environment, git_key, git_source, identity, memory, network, secret, secret_binding,
};
use utoipa::openapi::path::HttpMethod;
use utoipa::openapi::path::{Operation, Parameter, ParameterIn};
use utoipa::openapi::schema::ObjectBuilder;
use utoipa::openapi::schema::{KnownFormat, Schema, SchemaFormat, SchemaType, Type};
use utoipa::openapi::{OpenApi, RefOr, Required};

/// A rule on one value.
#[derive(Clone, Copy)]
enum Rule {
    /// At most this many characters.
    Chars(usize),
    /// At most this many bytes of UTF-8 (documented as characters: a longer string never fits).
    Bytes(usize),
    /// Between these, inclusive.
    Range(i64, i64),
    /// At most this many items (a list) or keys (a map).
    Items(usize),
    /// A date and time (RFC 3339; the parser also takes a naive one or a date alone).
    DateTime,
    /// An email address.
    Email,
    /// A UUID.
    Uuid,
    /// One of these.
    OneOf(&'static [&'static str]),
    /// At least this many characters.
    MinChars(usize),
    /// A map whose keys are not empty (a manifest's paths).
    NonEmptyKeys,
    /// A map whose keys match this regular expression.
    KeysMatching(&'static str),
    /// Matching this (ECMA 262) regular expression.
    Pattern(&'static str),
}

/// An absolute path: what the sandbox's file routes take (anything else is a 400).
const ABSOLUTE: &str = "^/";

/// No whitespace at all, as Rust's `char::is_whitespace` reads it (Unicode's White_Space),
/// and at least one character.
const NO_WHITESPACE: &str = "^[^\\t\\n\\u000b\\f\\r \\u0085\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]+$";

/// Where a rule goes inside the property: on it, or on each of its items / map values.
#[derive(Clone, Copy)]
enum At {
    Itself,
    Each,
}

use At::{Each, Itself};
use Rule::*;

/// The largest value the parsers take as a whole number (`i64`).
const I64: (i64, i64) = (i64::MIN, i64::MAX);

/// `(schema, property, where, rule)` for request bodies.
const BODY_RULES: &[(&str, &str, At, Rule)] = &[
    (
        "AgentCreate",
        "instructions",
        Itself,
        Bytes(agent::MAX_INSTRUCTIONS_LEN),
    ),
    (
        "AgentPatch",
        "instructions",
        Itself,
        Bytes(agent::MAX_INSTRUCTIONS_LEN),
    ),
    ("AgentCreate", "idle_ttl_seconds", Itself, Range(0, I64.1)),
    ("AgentPatch", "idle_ttl_seconds", Itself, Range(0, I64.1)),
    // A version that is not the stored one is a 409, whatever its value.
    ("AgentPatch", "version", Itself, Range(I64.0, I64.1)),
    ("MemoryPut", "version", Itself, Range(I64.0, I64.1)),
    (
        "MemoryPut",
        "memory",
        Itself,
        Bytes(memory::MAX_MEMORY_BYTES),
    ),
    (
        "MemoryPut",
        "summary",
        Itself,
        Chars(memory::MAX_SUMMARY_CHARS),
    ),
    ("ApiKeyCreate", "expires_at", Itself, DateTime),
    (
        "EnvironmentCreate",
        "metadata",
        Itself,
        Items(environment::MAX_METADATA_KEYS),
    ),
    (
        "EnvironmentCreate",
        "metadata",
        Each,
        Bytes(environment::MAX_METADATA_VALUE_BYTES),
    ),
    (
        "EnvironmentPatch",
        "metadata",
        Itself,
        Items(environment::MAX_METADATA_KEYS),
    ),
    (
        "EnvironmentPatch",
        "metadata",
        Each,
        Bytes(environment::MAX_METADATA_VALUE_BYTES),
    ),
    (
        "EnvironmentPatch",
        "description",
        Itself,
        Chars(environment::MAX_DESCRIPTION_LEN),
    ),
    (
        "EnvironmentConfig",
        "image",
        Itself,
        Bytes(environment::MAX_IMAGE_LEN),
    ),
    ("EnvironmentConfig", "image", Itself, Pattern(NO_WHITESPACE)),
    ("Packages", "apt", Itself, Items(environment::MAX_PACKAGES)),
    ("Packages", "apt", Each, Chars(environment::MAX_PACKAGE_LEN)),
    ("Packages", "pip", Itself, Items(environment::MAX_PACKAGES)),
    ("Packages", "pip", Each, Chars(environment::MAX_PACKAGE_LEN)),
    ("Packages", "npm", Itself, Items(environment::MAX_PACKAGES)),
    ("Packages", "npm", Each, Chars(environment::MAX_PACKAGE_LEN)),
    (
        "Packages",
        "cargo",
        Itself,
        Items(environment::MAX_PACKAGES),
    ),
    (
        "Packages",
        "cargo",
        Each,
        Chars(environment::MAX_PACKAGE_LEN),
    ),
    ("Packages", "gem", Itself, Items(environment::MAX_PACKAGES)),
    ("Packages", "gem", Each, Chars(environment::MAX_PACKAGE_LEN)),
    ("Packages", "go", Itself, Items(environment::MAX_PACKAGES)),
    ("Packages", "go", Each, Chars(environment::MAX_PACKAGE_LEN)),
    ("EntrySpec", "host", Itself, Bytes(git_key::MAX_HOST)),
    ("EntrySpec", "ref", Itself, Bytes(git_source::MAX_REF)),
    (
        "EntrySpec",
        "subpath",
        Itself,
        Bytes(git_source::MAX_SUBPATH),
    ),
    ("SkillsSource", "host", Itself, Bytes(git_key::MAX_HOST)),
    ("SkillsSource", "repo", Itself, Bytes(git_key::MAX_REPO)),
    ("SkillsSource", "ref", Itself, Bytes(git_source::MAX_REF)),
    (
        "SkillsSource",
        "subpath",
        Itself,
        Bytes(git_source::MAX_SUBPATH),
    ),
    ("SkillsSource", "ssh_key_id", Itself, Uuid),
    ("SandboxResources", "memory_mb", Itself, Range(64, I64.1)),
    (
        "SandboxResources",
        "disk_mb",
        Itself,
        Range(sandbox_agents_domain::session::MIN_DISK_MB, I64.1),
    ),
    (
        "StartProcess",
        "env",
        Itself,
        Items(sandbox_agents_sessions::MAX_PROCESS_ENV),
    ),
    ("UserCreate", "email", Itself, Email),
    ("ManifestSpec", "entries", Itself, NonEmptyKeys),
    (
        "EnvironmentCreate",
        "name",
        Itself,
        Pattern(environment::NAME_PATTERN),
    ),
    (
        "EnvironmentPatch",
        "name",
        Itself,
        Pattern(environment::NAME_PATTERN),
    ),
    (
        "SecretCreate",
        "value",
        Itself,
        Bytes(secret::MAX_VALUE_BYTES),
    ),
    (
        "SecretUpdate",
        "value",
        Itself,
        Bytes(secret::MAX_VALUE_BYTES),
    ),
    (
        "ManifestSpec",
        "environment",
        Itself,
        KeysMatching(sandbox_agents_domain::manifest::ENV_NAME_PATTERN),
    ),
    (
        "UserCreate",
        "password",
        Itself,
        MinChars(identity::MIN_PASSWORD_CHARS),
    ),
    (
        "Networking",
        "type",
        Itself,
        OneOf(&[
            environment::NETWORKING_UNRESTRICTED,
            environment::NETWORKING_LIMITED,
        ]),
    ),
    ("NetworkPolicy", "allow", Itself, Items(network::MAX_ALLOW)),
    ("NetworkPolicy", "allow", Each, Bytes(network::MAX_ENTRY)),
    (
        "NetworkPolicy",
        "presets",
        Itself,
        Items(network::MAX_PRESETS),
    ),
    (
        "NetworkPolicy",
        "presets",
        Each,
        OneOf(network::PRESET_NAMES),
    ),
    (
        "SecretInject",
        "host",
        Itself,
        Bytes(secret_binding::MAX_HOST),
    ),
    (
        "SecretInject",
        "header",
        Itself,
        Bytes(secret_binding::MAX_HEADER_NAME),
    ),
    (
        "SecretInject",
        "format",
        Itself,
        Bytes(secret_binding::MAX_FORMAT),
    ),
    (
        "SecretPlaceholder",
        "hosts",
        Each,
        Bytes(secret_binding::MAX_HOST),
    ),
    ("LoginBody", "email", Itself, Bytes(identity::MAX_EMAIL_LEN)),
    (
        "MemberCreate",
        "email",
        Itself,
        Bytes(identity::MAX_EMAIL_LEN),
    ),
];

/// `(path, query parameter, rule)`.
const QUERY_RULES: &[(&str, &str, Rule)] = &[
    (
        "/api/sessions/{session_id}/sandbox-files",
        "path",
        Pattern(ABSOLUTE),
    ),
    ("/api/sessions", "offset", Range(0, I64.1)),
    (
        "/api/webhooks/{webhook_id}/deliveries",
        "limit",
        Range(1, crate::extract::MAX_PAGE),
    ),
    (
        "/api/webhooks/{webhook_id}/deliveries",
        "offset",
        Range(0, I64.1),
    ),
    // A cursor below 0 reads from the start, as 0 does.
    (
        "/api/sessions/{session_id}/events",
        "after",
        Range(I64.0, I64.1),
    ),
    // A cursor below 0 reads from the start, as 0 does.
    (
        "/api/sessions/{session_id}/events/stream",
        "after",
        Range(I64.0, I64.1),
    ),
    (
        "/api/sessions/{session_id}/terminal",
        "cols",
        Range(1, sandbox_agents_sessions::MAX_TERMINAL_SIDE as i64),
    ),
    (
        "/api/sessions/{session_id}/terminal",
        "rows",
        Range(1, sandbox_agents_sessions::MAX_TERMINAL_SIDE as i64),
    ),
];

/// `(path, method)` of operations whose body may be empty: an empty body writes an empty file.
const OPTIONAL_BODIES: &[(&str, HttpMethod)] =
    &[("/api/sessions/{session_id}/sandbox-files", HttpMethod::Put)];

/// No string of a request may hold U+0000 (`nul.rs` refuses it before any handler): every
/// string a request body, query or path takes that has no pattern of its own gets this one.
const NO_NUL: &str = "^[^\\u0000]*$";

/// `doc` with every rule of the tables applied.
pub fn document(doc: OpenApi) -> OpenApi {
    let doc = apply_tables(doc);
    no_nul(doc)
}

fn apply_tables(mut doc: OpenApi) -> OpenApi {
    for (path, method) in OPTIONAL_BODIES {
        let item = doc
            .paths
            .paths
            .get_mut(*path)
            .unwrap_or_else(|| panic!("rules_docs: no path {path}"));
        let body = crate::error_docs::methods_mut(item)
            .find(|(m, _)| m == method)
            .and_then(|(_, op)| op.request_body.as_mut())
            .unwrap_or_else(|| panic!("rules_docs: no body on {path}"));
        body.required = Some(Required::False);
    }
    let schemas = &mut doc
        .components
        .as_mut()
        .expect("the document has components")
        .schemas;
    for (schema, property, at, rule) in BODY_RULES {
        let found = match schemas.get_mut(*schema) {
            Some(RefOr::T(s)) => property_mut(s, property)
                .into_iter()
                .map(|p| apply_one(p, *at, *rule))
                .count(),
            _ => 0,
        };
        assert!(
            found > 0,
            "rules_docs: no property {schema}.{property} in the document"
        );
    }
    for (path, name, rule) in QUERY_RULES {
        let item = doc
            .paths
            .paths
            .get_mut(*path)
            .unwrap_or_else(|| panic!("rules_docs: no path {path}"));
        let mut found = false;
        for operation in crate::error_docs::operations_mut(item) {
            for p in query_mut(operation, name) {
                if let Some(RefOr::T(s)) = p.schema.as_mut() {
                    found = true;
                    apply_one(s, Itself, *rule);
                }
            }
        }
        assert!(found, "rules_docs: no query parameter {name} on {path}");
    }
    doc
}

fn query_mut<'a>(op: &'a mut Operation, name: &'a str) -> impl Iterator<Item = &'a mut Parameter> {
    op.parameters
        .iter_mut()
        .flatten()
        .filter(move |p| p.name == name)
}

/// The schemas of `property` in an object schema, or in every variant of a one-of that has
/// it (an enum of objects, such as a manifest entry's kinds, carries its fields in each).
fn property_mut<'a>(schema: &'a mut Schema, property: &str) -> Vec<&'a mut Schema> {
    match schema {
        Schema::Object(o) => match o.properties.get_mut(property) {
            Some(RefOr::T(s)) => vec![s],
            _ => vec![],
        },
        Schema::OneOf(one) => one
            .items
            .iter_mut()
            .flat_map(|item| match item {
                RefOr::T(s) => property_mut(s, property),
                RefOr::Ref(_) => vec![],
            })
            .collect(),
        _ => vec![],
    }
}

fn is_null(schema: &Schema) -> bool {
    matches!(schema, Schema::Object(o) if o.schema_type == SchemaType::Type(Type::Null))
}

fn apply_one(schema: &mut Schema, at: At, rule: Rule) {
    match (schema, at) {
        (Schema::Object(o), Itself) => match rule {
            Chars(n) | Bytes(n) => o.max_length = Some(n),
            Items(n) => o.max_properties = Some(n),
            Range(min, max) => {
                o.minimum = Some(min.into());
                o.maximum = Some(max.into());
            }
            DateTime => o.format = Some(SchemaFormat::KnownFormat(KnownFormat::DateTime)),
            Email => {
                o.format = Some(SchemaFormat::KnownFormat(KnownFormat::Email));
                o.max_length = Some(identity::MAX_EMAIL_LEN);
            }
            Uuid => o.format = Some(SchemaFormat::KnownFormat(KnownFormat::Uuid)),
            Pattern(p) => o.pattern = Some(p.into()),
            MinChars(n) => o.min_length = Some(n),
            KeysMatching(p) => {
                o.property_names = Some(Box::new(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .pattern(Some(p))
                        .into(),
                ))
            }
            NonEmptyKeys => {
                o.property_names = Some(Box::new(
                    ObjectBuilder::new()
                        .schema_type(Type::String)
                        .min_length(Some(1))
                        .into(),
                ))
            }
            OneOf(values) => o.enum_values = Some(values.iter().map(|v| (*v).into()).collect()),
        },
        (Schema::Array(a), Itself) => match rule {
            Items(n) => a.max_items = Some(n),
            _ => panic!("rules_docs: a list takes only a number of items"),
        },
        (Schema::Array(a), Each) => {
            if let utoipa::openapi::schema::ArrayItems::RefOrSchema(item) = &mut a.items {
                if let RefOr::T(s) = item.as_mut() {
                    apply_one(s, Itself, rule);
                }
            }
        }
        (Schema::Object(o), Each) => {
            if let Some(values) = o.additional_properties.as_mut() {
                if let utoipa::openapi::schema::AdditionalProperties::RefOr(RefOr::T(s)) =
                    values.as_mut()
                {
                    apply_one(s, Itself, rule);
                }
            }
        }
        (Schema::OneOf(one), at) => {
            // `Option<T>` of a non-primitive: null or T.
            for item in one.items.iter_mut() {
                if let RefOr::T(s) = item {
                    if !is_null(s) {
                        apply_one(s, at, rule);
                    }
                }
            }
        }
        _ => panic!("rules_docs: a rule on a schema it does not fit"),
    }
}

/// Adds [`NO_NUL`] to every string without a pattern, enum or format in request bodies (the
/// component schemas they reach: response schemas that share them describe what was stored,
/// which held no U+0000 either), query and path parameters.
fn no_nul(mut doc: OpenApi) -> OpenApi {
    let mut reached = std::collections::BTreeSet::new();
    let mut pending = Vec::new();
    for item in doc.paths.paths.values_mut() {
        for operation in crate::error_docs::operations_mut(item) {
            for p in operation.parameters.iter_mut().flatten() {
                if matches!(p.parameter_in, ParameterIn::Query | ParameterIn::Path) {
                    if let Some(RefOr::T(s)) = p.schema.as_mut() {
                        forbid_nul(s, &mut pending);
                    }
                }
            }
            if let Some(body) = operation.request_body.as_mut() {
                for (media, content) in body.content.iter_mut() {
                    if media == "application/json" {
                        if let Some(s) = content.schema.as_mut() {
                            forbid_nul_ref(s, &mut pending);
                        }
                    }
                }
            }
        }
    }
    let schemas = &mut doc.components.as_mut().expect("components").schemas;
    while let Some(name) = pending.pop() {
        if !reached.insert(name.clone()) {
            continue;
        }
        if let Some(RefOr::T(s)) = schemas.get_mut(&name) {
            forbid_nul(s, &mut pending);
        }
    }
    doc
}

fn forbid_nul_ref(s: &mut RefOr<Schema>, pending: &mut Vec<String>) {
    match s {
        RefOr::Ref(r) => {
            if let Some(name) = r.ref_location.rsplit('/').next() {
                pending.push(name.to_owned());
            }
        }
        RefOr::T(s) => forbid_nul(s, pending),
    }
}

fn forbid_nul(schema: &mut Schema, pending: &mut Vec<String>) {
    match schema {
        Schema::Object(o) => {
            let string = match &o.schema_type {
                SchemaType::Type(Type::String) => true,
                SchemaType::Array(types) => types.contains(&Type::String),
                _ => false,
            };
            if string && o.pattern.is_none() && o.enum_values.is_none() && o.format.is_none() {
                o.pattern = Some(NO_NUL.into());
            }
            for p in o.properties.values_mut() {
                forbid_nul_ref(p, pending);
            }
            if let Some(values) = o.additional_properties.as_mut() {
                if let utoipa::openapi::schema::AdditionalProperties::RefOr(r) = values.as_mut() {
                    forbid_nul_ref(r, pending);
                }
            }
        }
        Schema::Array(a) => {
            if let utoipa::openapi::schema::ArrayItems::RefOrSchema(item) = &mut a.items {
                forbid_nul_ref(item, pending);
            }
        }
        Schema::OneOf(one) => one
            .items
            .iter_mut()
            .for_each(|i| forbid_nul_ref(i, pending)),
        Schema::AnyOf(any) => any
            .items
            .iter_mut()
            .for_each(|i| forbid_nul_ref(i, pending)),
        Schema::AllOf(all) => all
            .items
            .iter_mut()
            .for_each(|i| forbid_nul_ref(i, pending)),
        _ => {}
    }
}
