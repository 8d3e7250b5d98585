//! What a model call cost, in US dollars, and where that figure came from.
//!
//! Sources, first that applies:
//! 1. **The provider's own figure** for this call: `usage.cost` in the streamed usage chunk
//!    (LiteLLM with `include_cost_in_streaming_usage`, OpenRouter), else LiteLLM's
//!    `x-litellm-response-cost` response header (a stream's header is sent before the cost is
//!    known, so LiteLLM leaves it empty there; a non-empty one is used).
//! 2. **The catalogue's per-token prices** for the model (LiteLLM's `/model/info`:
//!    `input_cost_per_token`, `output_cost_per_token`, `cache_read_input_token_cost`,
//!    `output_cost_per_reasoning_token`), read through a [`PriceBook`].
//! 3. Otherwise the call is **unpriced** and counted as such (`Usage::unpriced_requests`),
//!    never as a silent zero.
//!
//! Invariant: a figure of zero reported for a call that used tokens is not trusted as a price
//! (LiteLLM reports 0 for models it has no price for); the catalogue is asked instead, where
//! an operator's explicit price of 0 (a local model) does price the call at 0.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Mutex;

use crate::types::Usage;

/// How long prices read from the catalogue are used before they are read again.
pub const PRICES_FOR: Duration = Duration::from_secs(300);
/// After a failed or priceless read, how long before the catalogue is asked again (a proxy
/// without prices is not asked on every call).
const RETRY_AFTER: Duration = Duration::from_secs(30);

/// A model's per-token prices, in US dollars.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prices {
    pub input: f64,
    pub output: f64,
    /// Input tokens read from the provider's prompt cache; `input` when not given.
    pub cached_input: Option<f64>,
    /// Reasoning tokens (part of the output); `output` when not given.
    pub reasoning: Option<f64>,
}

impl Prices {
    /// The cost of `u`'s tokens at these prices.
    pub fn cost(&self, u: &Usage) -> f64 {
        let cached = u.cached_input_tokens.min(u.input_tokens);
        let reasoning = u.reasoning_tokens.min(u.output_tokens);
        (u.input_tokens - cached) as f64 * self.input
            + cached as f64 * self.cached_input.unwrap_or(self.input)
            + (u.output_tokens - reasoning) as f64 * self.output
            + reasoning as f64 * self.reasoning.unwrap_or(self.output)
    }

    /// The prices in one `/model/info` entry's `model_info`, when it has both the input and
    /// the output price (a catalogue entry with one of them is not a price list).
    pub(crate) fn from_model_info(info: &Value) -> Option<Prices> {
        let get = |key: &str| {
            info.get(key)
                .and_then(Value::as_f64)
                .filter(|p| p.is_finite() && *p >= 0.0)
        };
        Some(Prices {
            input: get("input_cost_per_token")?,
            output: get("output_cost_per_token")?,
            cached_input: get("cache_read_input_token_cost"),
            reasoning: get("output_cost_per_reasoning_token"),
        })
    }
}

/// `model_name` → prices from LiteLLM's `/model/info`; the first entry of a name wins.
pub(crate) fn prices_by_name(info: &Value) -> HashMap<String, Prices> {
    let mut prices = HashMap::new();
    for entry in info
        .get("data")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (Some(name), Some(p)) = (
            entry.get("model_name").and_then(Value::as_str),
            entry.get("model_info").and_then(Prices::from_model_info),
        ) else {
            continue;
        };
        prices.entry(name.to_owned()).or_insert(p);
    }
    prices
}

/// A figure a provider reported, when it is one: a finite, non-negative number, and not a
/// zero for a call that used tokens.
pub(crate) fn reported(cost: f64, u: &Usage) -> Option<f64> {
    let used = u.input_tokens + u.output_tokens > 0;
    (cost.is_finite() && cost >= 0.0 && (cost > 0.0 || !used)).then_some(cost)
}

/// The header's figure (`x-litellm-response-cost`), when it holds a number.
pub(crate) fn header_cost(headers: &reqwest::header::HeaderMap) -> Option<f64> {
    headers
        .get("x-litellm-response-cost")?
        .to_str()
        .ok()?
        .trim()
        .parse::<f64>()
        .ok()
}

/// Prices read from the catalogue, shared by a client's clones; one read at a time.
#[derive(Debug, Default, Clone)]
pub(crate) struct PriceBook {
    read: Arc<Mutex<Option<Read>>>,
}

#[derive(Debug)]
struct Read {
    at: Instant,
    prices: HashMap<String, Prices>,
    /// The read failed or found no prices: asked again after [`RETRY_AFTER`].
    empty: bool,
}

impl PriceBook {
    /// `model`'s prices, reading the catalogue with `fetch` when what was read is stale.
    /// A failed read leaves the model unpriced (logged), never fails the call.
    pub(crate) async fn prices<F, Fut>(&self, model: &str, fetch: F) -> Option<Prices>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Option<HashMap<String, Prices>>>,
    {
        let mut read = self.read.lock().await;
        let fresh = read.as_ref().is_some_and(|r| {
            let ttl = if r.empty { RETRY_AFTER } else { PRICES_FOR };
            r.at.elapsed() < ttl
        });
        if !fresh {
            let prices = fetch().await;
            let empty = prices.as_ref().is_none_or(HashMap::is_empty);
            *read = Some(Read {
                at: Instant::now(),
                prices: prices.unwrap_or_default(),
                empty,
            });
        }
        read.as_ref()?.prices.get(model).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn usage(input: u64, cached: u64, output: u64, reasoning: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            total_tokens: input + output,
            requests: 1,
            cached_input_tokens: cached,
            reasoning_tokens: reasoning,
            ..Usage::default()
        }
    }

    #[test]
    fn cached_and_reasoning_tokens_take_their_own_prices_when_given() {
        let p = Prices {
            input: 1e-6,
            output: 4e-6,
            cached_input: Some(0.5e-6),
            reasoning: Some(8e-6),
        };
        let cost = p.cost(&usage(1000, 400, 100, 30));
        let want = 600.0 * 1e-6 + 400.0 * 0.5e-6 + 70.0 * 4e-6 + 30.0 * 8e-6;
        assert!((cost - want).abs() < 1e-12, "{cost} vs {want}");
        let plain = Prices {
            cached_input: None,
            reasoning: None,
            ..p
        };
        let cost = plain.cost(&usage(1000, 400, 100, 30));
        assert!((cost - (1000.0 * 1e-6 + 100.0 * 4e-6)).abs() < 1e-12);
    }

    #[test]
    fn the_catalogue_prices_models_that_name_both_prices() {
        let info = json!({"data": [
            {"model_name": "a", "model_info": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6,
                                               "cache_read_input_token_cost": 1e-7}},
            {"model_name": "a", "model_info": {"input_cost_per_token": 9.0, "output_cost_per_token": 9.0}},
            {"model_name": "free", "model_info": {"input_cost_per_token": 0, "output_cost_per_token": 0}},
            {"model_name": "half", "model_info": {"input_cost_per_token": 1e-6}},
            {"model_name": "nulls", "model_info": {"input_cost_per_token": null, "output_cost_per_token": null}},
            {"model_name": "negative", "model_info": {"input_cost_per_token": -1, "output_cost_per_token": 1}},
        ]});
        let p = prices_by_name(&info);
        assert_eq!(p["a"].input, 1e-6);
        assert_eq!(p["a"].cached_input, Some(1e-7));
        assert_eq!(p["free"].cost(&usage(10, 0, 10, 0)), 0.0);
        assert!(!p.contains_key("half") && !p.contains_key("nulls") && !p.contains_key("negative"));
    }

    #[test]
    fn a_zero_for_a_call_that_used_tokens_is_not_a_price() {
        assert_eq!(reported(0.0, &usage(10, 0, 5, 0)), None);
        assert_eq!(reported(0.0, &usage(0, 0, 0, 0)), Some(0.0));
        assert_eq!(reported(0.25, &usage(10, 0, 5, 0)), Some(0.25));
        assert_eq!(reported(f64::NAN, &usage(10, 0, 5, 0)), None);
        assert_eq!(reported(-1.0, &usage(10, 0, 5, 0)), None);
    }

    #[test]
    fn only_a_number_in_the_header_is_a_figure() {
        let mut h = reqwest::header::HeaderMap::new();
        assert_eq!(header_cost(&h), None);
        h.insert("x-litellm-response-cost", "".parse().unwrap());
        assert_eq!(header_cost(&h), None);
        h.insert("x-litellm-response-cost", "None".parse().unwrap());
        assert_eq!(header_cost(&h), None);
        h.insert("x-litellm-response-cost", "0.00042".parse().unwrap());
        assert_eq!(header_cost(&h), Some(0.00042));
    }

    #[tokio::test]
    async fn the_book_reads_once_while_fresh_and_again_soon_after_a_failure() {
        let book = PriceBook::default();
        let reads = std::sync::atomic::AtomicUsize::new(0);
        let p = Prices {
            input: 1.0,
            output: 2.0,
            cached_input: None,
            reasoning: None,
        };
        for _ in 0..3 {
            let got = book
                .prices("m", || async {
                    reads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    Some(HashMap::from([("m".to_owned(), p)]))
                })
                .await;
            assert_eq!(got, Some(p));
        }
        assert_eq!(reads.load(std::sync::atomic::Ordering::Relaxed), 1);
        assert_eq!(book.prices("other", || async { None }).await, None);

        let failing = PriceBook::default();
        assert_eq!(failing.prices("m", || async { None }).await, None);
        // Within the retry wait, the failure is remembered rather than read again.
        let again = failing
            .prices("m", || async { panic!("read again too soon") })
            .await;
        assert_eq!(again, None);
    }
}
