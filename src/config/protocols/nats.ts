/**
 * NATS JetStream as the configuration sees it (../protocol.ts): a source names a stream and a durable consumer, a target
 * a subject (its address template); a connection may log in with a `credentials-file`. Addresses: ./nats-address.ts.
 */
import { isAbsolute, resolve as resolvePath } from 'node:path';
import type { AddressSyntax } from '../../routing/address-values.js';
import { camelKeys } from '../camel-keys.js';
import { natsSubjectAddress, parseNatsUrl } from './nats-address.js';
import type { ProblemCollector } from '../problems.js';
import { CONNECTION_KEYS_RESOLVED, type ConfigProtocol } from '../protocol.js';
import { has } from '../raw-data.js';
import { readReferencedFile, urlHasUser, type Path } from '../referenced-file.js';

/** A NATS `credentials-file`: read now, and only where the URLs carry no user of their own (one way to log in). */
function readCredentials(file: string | undefined, urls: readonly string[], path: Path, baseDir: string, out: ProblemCollector): string | undefined {
  if (file === undefined) return undefined;
  const key = [...path, 'credentials-file'];
  if (urls.some(urlHasUser)) {
    out.atKey(key, 'give credentials-file or a user in the URL, not both (remove the user and password from the URL)');
    return undefined;
  }
  const content = readReferencedFile(file, baseDir, key, out, 'credentials-file');
  if (content === undefined) return undefined;
  if (!/-----BEGIN NATS USER JWT-----/.test(content) || !/-----BEGIN USER NKEY SEED-----/.test(content)) {
    out.atValue(key, `${isAbsolute(file) ? file : resolvePath(baseDir, file)} is not a NATS credentials file; expected a user JWT and an NKey seed block (as nsc writes them)`);
    return undefined;
  }
  return content;
}

// NATS subjects: `*` and `>` are wildcards (a publish to one is refused, a subscription would match many); `.`
// separates tokens, which subscriptions, stream subjects and permissions match.
const NATS_SYNTAX: AddressSyntax = { chars: '*>', what: 'a NATS subject wildcard', tokens: '.', tokensAlways: true, tokenWhat: "NATS's subject token separator" };

export const natsConfigProtocol: ConfigProtocol<'nats'> = {
  type: 'nats',
  // Its stream, consumer and subject on another protocol's endpoint, unless that protocol refuses them in its words.
  refuseElsewhere({ path, ep, role, connection, out }, host) {
    if (role === 'source') {
      for (const key of ['stream', 'consumer']) {
        if (has(ep, key) && !host.refuses.source.includes(key)) {
          out.atKey([...path, key], `applies only to a NATS source (connection '${connection}' is ${host.type}); use ${host.takes.useSource}`);
        }
      }
    } else if (has(ep, 'subject') && !host.refuses.target.includes('subject')) {
      out.atKey([...path, 'subject'], `applies only to a NATS target (connection '${connection}' is ${host.type}); use ${host.takes.useTarget}`);
    }
  },
  refuses: { source: ['queue'], target: ['queue', 'exchange', 'exchange-type', 'routing-key'] },
  takes: { source: 'its source takes stream and consumer', target: 'its target takes subject', useSource: 'stream and consumer', useTarget: 'subject' },
  checkSource({ path, ep: source, connection, out }) {
    if (has(source, 'queue')) out.atKey([...path, 'queue'], `not valid on a NATS source (connection '${connection}' is nats); use stream and consumer`);
    if (!has(source, 'stream')) out.atValue(path, 'missing stream; a NATS source takes stream (a JetStream stream) and consumer (a durable pull consumer)');
    if (!has(source, 'consumer')) out.atValue(path, 'missing consumer; a NATS source takes stream and consumer (the durable pull consumer: used when it exists, created when not)');
    if (source.exclusive === true) {
      out.atKey([...path, 'exclusive'], `not supported on a NATS source (connection '${connection}' is nats): replicas share its durable consumer; remove exclusive`);
    }
  },
  checkTarget({ path, ep: target, connection, out }) {
    for (const key of natsConfigProtocol.refuses.target) {
      if (has(target, key)) {
        out.atKey([...path, key], `not valid on a NATS target (connection '${connection}' is nats); use subject, the subject a JetStream stream captures`);
      }
    }
    if (!has(target, 'subject')) out.atValue(path, 'missing subject; a NATS target takes subject (a stream must capture it: the bridge never creates streams)');
  },

  tlsScheme: 'tls',
  userExample: 'nats://USER@host',
  readFiles(c, urls, path, baseDir, out) {
    const credentials = readCredentials(c['credentials-file'], urls, path, baseDir, out);
    return credentials !== undefined ? { credentials } : {};
  },

  resolveConnection: (c, resolved, files) => ({
    ...camelKeys(c, [...CONNECTION_KEYS_RESOLVED, 'credentials-file']),
    ...resolved,
    ...(files.credentials !== undefined ? { credentials: files.credentials } : {}),
  }),
  // The stream doubles as `queue`, so that messages and checks can name what is read.
  resolveSource: (s, connection) => ({ connection, queue: s.stream ?? '', consumer: s.consumer ?? '', exclusive: s.exclusive ?? false }),
  templateKeys: ['subject'],
  templateText: (target) => target.subject,

  addressSyntax: NATS_SYNTAX,
  cacheAddress: (target) => natsSubjectAddress(target.connection, target.subject ?? ''),
  resolvedRoute: (target, resolved) => ({ route: resolved, address: natsSubjectAddress(target.connection, resolved) }),
  brokerName: (_connection, url) => `nats://${parseNatsUrl(url).hostPort}`,
};
