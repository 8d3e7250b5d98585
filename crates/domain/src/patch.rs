//! Absent-vs-null for PATCH bodies: a field left out of the body is left alone,
//! a field sent as `null` is cleared. `Option<T>` cannot tell the two apart, so PATCH bodies
//! use [`Patch<T>`] with `#[serde(default)]`.

use serde::{Deserialize, Deserializer};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Patch<T> {
    /// The field was not in the body: leave the stored value as it is.
    #[default]
    Absent,
    /// The field was sent as `null`: clear it (or return to the server default).
    Null,
    /// The field was sent with a value.
    Value(T),
}

impl<T> Patch<T> {
    pub fn is_absent(&self) -> bool {
        matches!(self, Patch::Absent)
    }

    /// `None` when absent, `Some(None)` when null, `Some(Some(v))` with a value.
    pub fn into_option(self) -> Option<Option<T>> {
        match self {
            Patch::Absent => None,
            Patch::Null => Some(None),
            Patch::Value(v) => Some(Some(v)),
        }
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Patch<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Only called when the key is present; `#[serde(default)]` covers the absent case.
        Ok(match Option::<T>::deserialize(d)? {
            None => Patch::Null,
            Some(v) => Patch::Value(v),
        })
    }
}

/// `deserialize_with` for create-body fields that may be omitted but never sent as `null`
/// (null there is a 422, as the published client expects).
pub fn non_null<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    match Option::<T>::deserialize(d)? {
        Some(v) => Ok(v),
        None => Err(serde::de::Error::custom("Input should not be null")),
    }
}

/// A struct whose derived parser (`#[serde(remote = "Self")]`) is wrapped by
/// [`object_only`] in its `Deserialize`.
pub trait FromObject<'de>: Sized {
    /// The derived parser.
    fn from_fields<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error>;
}

/// Parses `T` from an object (a map) only. serde's derived struct parsing also takes an array
/// of the fields in order, so for a struct whose fields are all optional `[]` or
/// `[null, null]` would be accepted as "nothing set", which the document never promised and
/// no client means (the API fuzz sends exactly that). The map is handed on as it is, so an
/// error inside still names its field's path.
pub fn object_only<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromObject<'de>,
{
    struct Fields<T>(std::marker::PhantomData<T>);
    impl<'de, T: FromObject<'de>> serde::de::Visitor<'de> for Fields<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::from_fields(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    d.deserialize_map(Fields(std::marker::PhantomData))
}

/// `Serialize`, `Deserialize` (objects only, through [`object_only`]) and [`FromObject`] for
/// structs that derive serde's traits with `#[serde(remote = "Self")]`, which turns the
/// derived code into inherent functions these impls call.
macro_rules! object_only_serde {
    ($($t:ty),+ $(,)?) => {$(
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                <$t>::serialize(self, s)
            }
        }

        impl<'de> serde::Deserialize<'de> for $t {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                $crate::patch::object_only(d)
            }
        }

        impl<'de> $crate::patch::FromObject<'de> for $t {
            fn from_fields<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$t>::deserialize(d)
            }
        }
    )+};
}
pub(crate) use object_only_serde;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Body {
        #[serde(default)]
        image: Patch<String>,
    }

    #[test]
    fn absent_null_and_value_are_three_different_things() {
        let absent: Body = serde_json::from_str("{}").unwrap();
        let null: Body = serde_json::from_str(r#"{"image":null}"#).unwrap();
        let value: Body = serde_json::from_str(r#"{"image":"x"}"#).unwrap();
        assert_eq!(absent.image, Patch::Absent);
        assert_eq!(null.image, Patch::Null);
        assert_eq!(value.image, Patch::Value("x".into()));
    }
}
