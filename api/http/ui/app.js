// The management UI's entry: login, the page for the location hash, and the live refresh
// (every 5 s, without reloading the page; one refresh at a time).

import {h, fill, field, message} from './dom.js';
import {parse} from './router.js';
import {login, logout, resume, LOGIN_TAGS} from './session.js';
import {History} from './samples.js';
import {ApiError} from './api.js';
import * as overview from './pages/overview.js';
import * as queues from './pages/queues.js';
import * as queue from './pages/queue.js';
import * as exchanges from './pages/exchanges.js';
import * as exchange from './pages/exchange.js';
import * as connections from './pages/connections.js';
import * as channels from './pages/channels.js';
import * as admin from './pages/admin.js';

const PAGES = {overview, queues, queue, exchanges, exchange, connections, channels, admin};
const DEFAULT_REFRESH_MS = 5000;

/** `?refresh_ms=N` (0.5 to 60 s) changes the refresh period, e.g. for tests. */
function refreshPeriod() {
  const asked = Number(new URLSearchParams(location.search).get('refresh_ms'));
  return asked >= 500 && asked <= 60000 ? asked : DEFAULT_REFRESH_MS;
}

class App {
  constructor() {
    this.main = document.getElementById('main');
    this.banner = document.getElementById('banner');
    this.refreshed = document.getElementById('refreshed');
    this.period = refreshPeriod();
    this.history = new History();
    this.session = null;
    this.page = null;
    this.timer = null;
    this.generation = 0;
    window.addEventListener('hashchange', () => this.show());
    document.getElementById('logout').addEventListener('click', () => this.logOut());
  }

  async start() {
    try {
      this.session = await resume();
    } catch (error) {
      this.notice(`The broker does not answer: ${error.message}`);
    }
    if (this.session) this.loggedIn(); else this.loginForm();
  }

  loginForm(text) {
    this.stopRefresh();
    document.getElementById('nav').hidden = true;
    document.getElementById('who').hidden = true;
    document.getElementById('logout').hidden = true;
    const note = h('p', {id: 'login-error', class: 'note', role: 'alert'});
    const form = h('form', {id: 'login', class: 'login panel'},
      h('h2', {}, 'Log in'),
      field('User name', h('input', {name: 'user', autocomplete: 'username', required: true})),
      field('Password', h('input', {name: 'password', type: 'password',
        autocomplete: 'current-password'})),
      h('button', {type: 'submit'}, 'Log in'), note,
      h('p', {class: 'muted'}, `Users tagged ${LOGIN_TAGS.join(', ')} may log in.`));
    if (text) message(note, text, false);
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      try {
        this.session = await login(form.elements.user.value, form.elements.password.value);
        this.loggedIn();
      } catch (error) {
        message(note, error.message, false);
      }
    });
    fill(this.main, form);
    form.elements.user.focus();
  }

  loggedIn() {
    const {session} = this;
    document.getElementById('nav').hidden = false;
    const who = document.getElementById('who');
    who.hidden = false;
    who.textContent = `${session.user} (${[...session.tags].join(', ')})`;
    document.getElementById('logout').hidden = false;
    this.show();
  }

  logOut(text) {
    logout();
    this.session = null;
    this.page = null;
    this.loginForm(text);
  }

  show() {
    if (!this.session) return;
    this.stopRefresh();
    const route = parse(location.hash);
    for (const a of document.querySelectorAll('#nav a')) {
      a.classList.toggle('active', a.dataset.page === route.section);
    }
    const context = {session: this.session, api: this.session.api, history: this.history,
      period: this.period};
    this.page = PAGES[route.page].create(context, route.params);
    fill(this.main, this.page.element);
    this.generation += 1;
    this.tick(this.generation);
  }

  /** Refresh the page, then schedule the next one: never two at once. */
  async tick(generation) {
    try {
      await this.page.refresh();
      if (generation !== this.generation) return;
      this.notice(null);
      this.refreshed.textContent = `updated ${new Date().toLocaleTimeString('en-GB')}`;
    } catch (error) {
      if (generation !== this.generation) return;
      if (error instanceof ApiError && error.status === 401) {
        this.logOut('Your login is no longer accepted: log in again.');
        return;
      }
      this.notice(`Refresh failed: ${error.message}`);
    }
    this.timer = setTimeout(() => this.tick(generation), this.period);
  }

  stopRefresh() {
    clearTimeout(this.timer);
    this.timer = null;
    this.generation += 1;
  }

  notice(text) {
    this.banner.hidden = !text;
    this.banner.textContent = text ?? '';
  }
}

new App().start();
