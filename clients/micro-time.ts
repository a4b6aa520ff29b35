// The Kubernetes API's MicroTime (a Lease's acquire and renew times, an Event's eventTime and
// series.lastObservedTime): RFC 3339 with six fractional digits, where a JavaScript Date has three.

export function microTime(d: Date): string {
  return d.toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}
