/**
 * MQTT packet identifiers (MQTT 5 section 2.2.1): 1 to 65,535, one for each outgoing PUBLISH (QoS 1) or SUBSCRIBE until
 * its answer came; handed out round-robin so that a late answer to an old identifier cannot match a new packet soon.
 */
export const MAX_PACKET_ID = 65_535;

export class PacketIds {
  private next = 1;

  /** The first identifier, from the one after the last given, that `inUse` does not hold. */
  allocate(inUse: (id: number) => boolean, what: string): number {
    for (let i = 0; i < MAX_PACKET_ID; i++) {
      const id = this.next;
      this.next = id === MAX_PACKET_ID ? 1 : id + 1;
      if (!inUse(id)) return id;
    }
    // The session's window never exceeds the identifiers: unreachable.
    throw new RangeError(`${what}: no free packet identifier`);
  }
}
