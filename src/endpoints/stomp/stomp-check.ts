/**
 * `check` for a STOMP connection (src/service/check.ts runs it through the record, ./stomp-protocol.ts): reachable, the
 * peer's profile (which also tells whether it shares a connection, for the count of connections). Destinations need no
 * declaring (the broker creates one on first use) and cannot be checked without SUBSCRIBE or SEND, so each use is only
 * named.
 */
import type { StompConnectionConfig } from '../../config/protocols/stomp-schema.js';
import type { Finding } from '../../core/finding.js';
import { silentLogger } from '../../shared/log.js';
import { usesOf, type CheckContext } from '../protocol-check.js';
import { connectStomp, type StompSession } from './stomp-client.js';
import { stompPeerProfile } from './stomp-peer.js';

export async function checkStomp(conn: StompConnectionConfig, { bridges, learnt }: CheckContext): Promise<Finding[]> {
  const subject = `connection ${conn.name}`;
  let session: StompSession;
  try {
    session = await connectStomp(conn, silentLogger);
  } catch (err) {
    return [{ level: 'error', subject, message: (err as Error).message }];
  }
  try {
    const profile = stompPeerProfile(session.server);
    learnt.set(conn.name, { shared: profile.sharedConnection });
    const findings: Finding[] = [
      { level: 'ok', subject, message: `reachable: ${conn.name} (${session.peer}), STOMP ${session.version}, server ${session.server ?? '(not named)'}` },
      {
        level: profile.kind === 'unknown' ? 'warning' : 'info',
        subject,
        message:
          profile.kind === 'unknown'
            ? `peer profile unknown (server ${session.server ?? 'not named'}): the bridge gives it the cautious answers (stamps by fingerprint, both prefetch headers)`
            : `peer profile ${profile.kind}: message-id ${profile.stableMessageId ? 'stable across redeliveries' : 'not trusted as an identity (stamps by fingerprint)'}, prefetch by ${profile.prefetchHeaders.join(' and ')}, ${profile.sharedConnection ? 'one connection per role shared by the bridges' : 'a connection per endpoint (not shared)'}`,
      },
    ];
    for (const use of usesOf(conn, bridges)) {
      const name = use.role === 'source' ? use.queue : use.target?.queue;
      findings.push({
        level: 'info',
        subject: `bridge ${use.bridge}`,
        message: `${use.role} '${name ?? ''}' on ${conn.name}: not checkable over STOMP (it has no passive declare; a SUBSCRIBE or SEND would create it)`,
      });
    }
    return findings;
  } finally {
    await session.disconnect(2000);
  }
}
