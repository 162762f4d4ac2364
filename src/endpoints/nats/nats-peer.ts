/**
 * What a NATS JetStream peer gives the bridge, said once, as the STOMP peer profiles say theirs (../stomp/stomp-peer.ts):
 * logged when an endpoint opens and reported by `check`. Checked against nats-server 2.9.10.
 */
export interface NatsPeerProfile {
  readonly kind: 'nats-jetstream';
  /** A message's identity is the same on every redelivery: its `Nats-Msg-Id`, else its stream sequence. No stamps needed. */
  readonly stableMessageId: true;
  /** Application headers travel (the duplicate ID and the possible-duplicate flag among them). */
  readonly headers: true;
  /**
   * The target drops a second message with the same `Nats-Msg-Id` itself, within the stream's `duplicate_window`
   * (PubAck `duplicate: true`): the crash gap closes there (docs/delivery.md).
   */
  readonly targetDeduplicates: 'within-duplicate-window';
}

export const NATS_JETSTREAM: NatsPeerProfile = {
  kind: 'nats-jetstream',
  stableMessageId: true,
  headers: true,
  targetDeduplicates: 'within-duplicate-window',
};

/** The profile as log fields (once per connection). */
export function natsProfileFields(profile: NatsPeerProfile = NATS_JETSTREAM): Record<string, unknown> {
  return { peerKind: profile.kind, stableMessageId: profile.stableMessageId, headers: profile.headers, targetDeduplicates: profile.targetDeduplicates };
}
