// Running a change the user asked for: the outcome goes in the form's note, the
// broker's reason when it refused.

import {message} from '../dom.js';

/** Run `action`; show `done` (or what it returns) in `note`, or the refusal. */
export async function perform(note, action, done) {
  message(note, 'Working…', true);
  try {
    const result = await action();
    message(note, typeof done === 'function' ? done(result) : done, true);
    return result;
  } catch (error) {
    const field = error.field ? ` (${error.field})` : '';
    const status = error.status ? `${error.status}: ` : '';
    message(note, `Refused: ${status}${error.message}${field}`, false);
    return undefined;
  }
}

/** A JSON object typed into a form ('' is {}); a clear error naming the field. */
export function parseJsonObject(text, fieldName) {
  if (!text || !text.trim()) return {};
  let value;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new Error(`${fieldName} is not JSON: ${error.message}`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new Error(`${fieldName} must be a JSON object`);
  }
  return value;
}
