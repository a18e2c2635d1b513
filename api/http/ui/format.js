// How figures read: counts with separators, rates per second, bytes, ages.

export function count(value) {
  if (value === undefined || value === null) return '';
  return Number(value).toLocaleString('en-US');
}

export function rate(value) {
  if (value === undefined || value === null) return '';
  const n = Number(value);
  // Digits by the rounded size, so that 99.97 reads "100/s" as 100.2 does, not "100.0/s".
  const digits = n >= 99.95 ? 0 : (n >= 9.995 ? 1 : 2);
  return `${n.toLocaleString('en-US',
    {minimumFractionDigits: digits, maximumFractionDigits: digits})}/s`;
}

export function bytes(value) {
  if (value === undefined || value === null) return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let n = Number(value);
  let unit = 0;
  while (n >= 1024 && unit < units.length - 1) { n /= 1024; unit += 1; }
  return `${unit === 0 ? Math.round(n) : n.toFixed(1)} ${units[unit]}`;  // rates too
}

/** "3 min 5 s" for a duration in milliseconds. */
export function duration(ms) {
  if (ms === undefined || ms === null || ms < 0) return '';
  let s = Math.floor(ms / 1000);
  const parts = [];
  for (const [unit, size] of [['d', 86400], ['h', 3600], ['min', 60]]) {
    if (s >= size) { parts.push(`${Math.floor(s / size)} ${unit}`); s %= size; }
  }
  if (parts.length < 2) parts.push(`${s} s`);
  return parts.slice(0, 2).join(' ');
}

/** A wall-clock time in milliseconds since the epoch, local and to the second. */
export function time(ms) {
  if (!ms) return '';
  return new Date(ms).toLocaleString('en-GB', {hour12: false});
}

/** A list of names, comma-separated. */
export function names(list) {
  return Array.isArray(list) ? list.join(', ') : (list ?? '');
}

/** A JSON value shown compactly ({} and [] as blank). */
export function json(value) {
  if (value === undefined || value === null) return '';
  if (typeof value === 'object' && Object.keys(value).length === 0) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** Each follower's lag: `replica_lag` (asked of the leader) or `followers` (any node). */
export function followerLag(queue) {
  const lags = queue.replica_lag
    ?? Object.fromEntries((queue.followers ?? []).map((f) => [f.node, f.lag]));
  return Object.entries(lags).map(([node, lag]) => `${node}: ${lag ?? '?'}`).join(', ');
}

/** The rate of a `*_details` field of message_stats. */
export function statRate(stats, name) {
  return stats?.[`${name}_details`]?.rate;
}
