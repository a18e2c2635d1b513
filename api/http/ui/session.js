// Who is logged in: credentials kept in sessionStorage (gone when the tab closes), the
// user's management tags, and what those tags let the UI offer.

import {Api, ApiError} from './api.js';

const KEY = 'logbroker.credentials';
export const LOGIN_TAGS = ['management', 'policymaker', 'monitoring', 'administrator'];

export class Session {
  constructor(credentials, whoami) {
    this.user = whoami.name;
    this.tags = new Set(whoami.tags);
    this.api = new Api(credentials);
  }

  get isAdmin() { return this.tags.has('administrator'); }

  /** monitoring users look, they do not change: the UI hides what would change things. */
  get readOnly() { return !this.isAdmin && this.tags.has('monitoring'); }

  get seesNodes() { return this.isAdmin || this.tags.has('monitoring'); }

  get maySetPolicies() { return this.isAdmin || this.tags.has('policymaker'); }
}

/** A login the broker refused (as opposed to a broker that did not answer). */
export class LoginRefused extends Error {}

function refusedTags(user) {
  return new LoginRefused(`Login refused: user '${user}' has none of the tags `
    + `${LOGIN_TAGS.join(', ')}.`);
}

/** Log in: the user must exist, the password match and a management tag be there. */
export async function login(user, password) {
  const credentials = {user, password};
  let whoami;
  try {
    whoami = await new Api(credentials).get('/api/whoami');
  } catch (error) {
    if (error instanceof ApiError && error.status === 401) {
      throw new LoginRefused('Login failed: wrong user name or password.');
    }
    if (error instanceof ApiError && error.status === 403) throw refusedTags(user);
    throw error;
  }
  if (!whoami.tags.some((tag) => LOGIN_TAGS.includes(tag))) throw refusedTags(user);
  sessionStorage.setItem(KEY, JSON.stringify(credentials));
  return new Session(credentials, whoami);
}

/** The session of this tab, if its stored credentials still log in (they are kept when
 * the broker does not answer: a node restarting should not log the user out). */
export async function resume() {
  const stored = sessionStorage.getItem(KEY);
  if (!stored) return null;
  try {
    const {user, password} = JSON.parse(stored);
    return await login(user, password);
  } catch (error) {
    if (error instanceof LoginRefused || error instanceof SyntaxError) {
      sessionStorage.removeItem(KEY);
      return null;
    }
    throw error;
  }
}

export function logout() {
  sessionStorage.removeItem(KEY);
}
