/**
 * Opens a preview URL in a new tab with rel=noopener noreferrer: the preview cannot reach back
 * into this window, and it gets no Referer with the session's URL. The signed URL is the only
 * credential; no cookie or key is added to it. Anything but http(s) is refused.
 */
export function openPreview(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url, window.location.href);
  } catch {
    return false;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return false;
  const a = document.createElement('a');
  a.href = parsed.href;
  a.target = '_blank';
  a.rel = 'noopener noreferrer';
  document.body.appendChild(a);
  a.click();
  a.remove();
  return true;
}
