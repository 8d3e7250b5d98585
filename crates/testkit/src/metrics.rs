//! `GET /metrics` read the way a scraper does.

use crate::TestApp;

pub async fn scrape(app: &TestApp) -> String {
    let r = app.http.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r
        .headers()
        .get("content-type")
        .unwrap()
        .to_str()
        .unwrap()
        .starts_with("text/plain; version=0.0.4"));
    r.text().await.unwrap()
}

/// The value of the sample `name{labels}` (labels as rendered, in order), if present.
pub fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (s, v) = l.rsplit_once(' ')?;
        (s == series).then(|| v.parse().ok()).flatten()
    })
}
