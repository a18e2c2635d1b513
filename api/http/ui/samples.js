// What the charts plot. The broker keeps samples of its figures (RabbitMQ's
// `*_details.samples`, newest first) when asked with `msg_rates_age` / `lengths_age`;
// where an answer has none (a broker that does not keep them), the UI keeps its own
// samples of the figures it polls, a bounded number per figure, and plots those.

export const SAMPLE_AGE_S = 600;   // ten minutes of history asked of the broker
export const SAMPLE_INCR_S = 5;
export const MAX_POINTS = 180;     // our own samples per figure: 15 min at 5 s
const MAX_FIGURES = 200;           // figures we keep samples of (pages visited)

/** The query that asks the broker for its samples (RabbitMQ's parameter names). */
export const SAMPLES_QUERY = `msg_rates_age=${SAMPLE_AGE_S}&msg_rates_incr=${SAMPLE_INCR_S}`
  + `&lengths_age=${SAMPLE_AGE_S}&lengths_incr=${SAMPLE_INCR_S}`;

/** Our own bounded samples of polled figures, by key. */
export class History {
  constructor(limit = MAX_POINTS) {
    this.limit = limit;
    this.series = new Map();
  }

  record(key, timestampMs, value) {
    if (typeof value !== 'number') return;
    let points = this.series.get(key);
    if (points === undefined) {
      if (this.series.size >= MAX_FIGURES) this.series.delete(this.series.keys().next().value);
      points = [];
      this.series.set(key, points);
    }
    if (points.length && points[points.length - 1][0] >= timestampMs) return;
    points.push([timestampMs, value]);
    if (points.length > this.limit) points.splice(0, points.length - this.limit);
  }

  points(key) {
    return this.series.get(key) ?? [];
  }
}

/** [[timestamp, value]] oldest first from a `*_details` object's samples, or null. */
export function brokerPoints(details) {
  const samples = details?.samples;
  if (!Array.isArray(samples) || samples.length === 0) return null;
  return samples.map((s) => [s.timestamp, s.sample]).sort((a, b) => a[0] - b[0]);
}

/** Per-second rates between consecutive samples of a counter (a counter that went
 * down, a restarted node, reads as 0). */
export function ratesOf(points) {
  const out = [];
  for (let i = 1; i < points.length; i += 1) {
    const [t0, v0] = points[i - 1];
    const [t1, v1] = points[i];
    if (t1 > t0) out.push([t1, Math.max(0, ((v1 - v0) * 1000) / (t1 - t0))]);
  }
  return out;
}

/**
 * One chart's series from an API answer. spec: {name, value(answer), details(answer),
 * counter: true for a cumulative count plotted as a rate}. scope names the answer
 * (e.g. the queue) so that our own samples of different objects stay apart.
 */
export function chartSeries(answer, specs, history, scope, nowMs) {
  return specs.map((spec) => {
    let points = brokerPoints(spec.details(answer));
    if (points === null) {
      const key = `${scope}\u0000${spec.name}`;
      history.record(key, nowMs, spec.value(answer));
      points = history.points(key);
    }
    return {name: spec.name, points: spec.counter ? ratesOf(points) : points};
  });
}

/** Specs of RabbitMQ's message_stats counters, plotted as rates. */
export function rateSpecs(names) {
  return names.map(([label, stat]) => ({
    name: label, counter: true,
    value: (answer) => answer?.message_stats?.[stat],
    details: (answer) => answer?.message_stats?.[`${stat}_details`],
  }));
}

/** Specs of queue lengths, at `path` (e.g. 'queue_totals' or '' for a queue view). */
export function lengthSpecs(pathOf) {
  return [['ready', 'messages_ready'], ['unacked', 'messages_unacknowledged']].map(
    ([label, key]) => ({
      name: label, counter: false,
      value: (answer) => pathOf(answer)?.[key],
      details: (answer) => pathOf(answer)?.[`${key}_details`],
    }));
}

/** The rate series every chart of message rates shows (where the answer has them). */
export const MESSAGE_RATES = [
  ['published', 'publish'], ['delivered', 'deliver_get'], ['acked', 'ack'],
  ['redelivered', 'redeliver'], ['confirmed', 'confirm'],
];

/** The ones the answer has (a counter or samples): a chart need not show empty series. */
export function present(specs, answer) {
  return specs.filter((spec) => spec.value(answer) !== undefined
    || brokerPoints(spec.details(answer)) !== null);
}

// The kinds of path (overview, queues, exchanges) whose answers refused the parameters.
const refusingSamples = new Set();

/**
 * GET `path` asking for the broker's samples; where a broker refuses the sample
 * parameters (400 naming one), that kind of path is asked without them from then on.
 */
export async function getSampled(api, path) {
  const kind = path.split('/')[2];
  if (!refusingSamples.has(kind)) {
    try {
      return await api.get(`${path}?${SAMPLES_QUERY}`);
    } catch (error) {
      if (error.status !== 400 || !/_(age|incr)$/.test(error.field ?? '')) throw error;
      refusingSamples.add(kind);
    }
  }
  return api.get(path);
}
