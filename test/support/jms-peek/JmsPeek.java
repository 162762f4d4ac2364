/*
 * JmsPeek: a tiny JMS consumer, to see ActiveMQ messages the way a Java (JMS) application sees them.
 *
 *   java -cp <activemq-client, geronimo-jms, hawtbuf, slf4j-api, j2ee-management jars> JmsPeek.java <brokerUrl> <queue> <count> [timeoutMs]
 *
 * Run with Java 11+ single-file launch (no build step). It consumes up to <count> messages from <queue> over OpenWire
 * (CLIENT_ACKNOWLEDGE, acked once all were read) and prints one JSON object per message on stdout. It stops early
 * when no message arrives within [timeoutMs] (default 10000). Exit code 0 when <count> messages were read, 2 when
 * fewer, 1 on an error. A TextMessage whose text the client cannot decode is printed with an "error" field instead of
 * "text". Written by hand (no JSON library on the class path).
 */
import java.util.Enumeration;
import javax.jms.BytesMessage;
import javax.jms.Connection;
import javax.jms.Message;
import javax.jms.MessageConsumer;
import javax.jms.Session;
import javax.jms.TextMessage;
import org.apache.activemq.ActiveMQConnectionFactory;

public class JmsPeek {
  public static void main(String[] args) throws Exception {
    if (args.length < 3) {
      System.err.println("usage: JmsPeek <brokerUrl> <queue> <count> [timeoutMs]");
      System.exit(64);
    }
    String url = args[0];
    String queue = args[1];
    int count = Integer.parseInt(args[2]);
    long timeout = args.length > 3 ? Long.parseLong(args[3]) : 10000L;
    ActiveMQConnectionFactory factory = new ActiveMQConnectionFactory(url);
    Connection connection = factory.createConnection();
    int read = 0;
    try {
      connection.start();
      Session session = connection.createSession(false, Session.CLIENT_ACKNOWLEDGE);
      MessageConsumer consumer = session.createConsumer(session.createQueue(queue));
      Message last = null;
      while (read < count) {
        Message m = consumer.receive(timeout);
        if (m == null) break;
        System.out.println(describe(m));
        System.out.flush();
        last = m;
        read++;
      }
      // CLIENT_ACKNOWLEDGE acks every message the session consumed so far.
      if (last != null) last.acknowledge();
      consumer.close();
      session.close();
    } finally {
      connection.close();
    }
    System.exit(read == count ? 0 : 2);
  }

  private static String describe(Message m) throws Exception {
    StringBuilder sb = new StringBuilder("{");
    if (m instanceof TextMessage) {
      field(sb, "class", "TextMessage");
      try {
        field(sb, "text", ((TextMessage) m).getText());
      } catch (javax.jms.JMSException e) {
        // A body the JMS client cannot decode (e.g. ActiveMQ's modified-UTF-8 reader on a 4-byte UTF-8 sequence):
        // reported, so the caller sees what a JMS application would get, and the other messages still come.
        Throwable cause = e.getCause() != null ? e.getCause() : e;
        field(sb, "error", cause.getClass().getName() + (cause.getMessage() != null ? ": " + cause.getMessage() : ""));
      }
    } else if (m instanceof BytesMessage) {
      BytesMessage b = (BytesMessage) m;
      byte[] bytes = new byte[(int) b.getBodyLength()];
      b.readBytes(bytes);
      field(sb, "class", "BytesMessage");
      field(sb, "bytes", hex(bytes));
    } else {
      field(sb, "class", m.getClass().getSimpleName());
    }
    field(sb, "messageId", m.getJMSMessageID());
    field(sb, "correlationId", m.getJMSCorrelationID());
    field(sb, "type", m.getJMSType());
    sb.append(",\"priority\":").append(m.getJMSPriority());
    sb.append(",\"deliveryMode\":").append(m.getJMSDeliveryMode());
    sb.append(",\"expiration\":").append(m.getJMSExpiration());
    sb.append(",\"timestamp\":").append(m.getJMSTimestamp());
    sb.append(",\"redelivered\":").append(m.getJMSRedelivered());
    sb.append(",\"properties\":{");
    boolean first = true;
    for (Enumeration<?> e = m.getPropertyNames(); e.hasMoreElements();) {
      String name = (String) e.nextElement();
      Object v = m.getObjectProperty(name);
      if (!first) sb.append(',');
      first = false;
      sb.append(quote(name)).append(':');
      // The JSON value says the JMS type: strings as JSON strings, every other type as {"type":..,"value":"..."}.
      if (v instanceof String) sb.append(quote((String) v));
      else sb.append("{\"type\":").append(quote(v == null ? "null" : v.getClass().getSimpleName())).append(",\"value\":").append(quote(String.valueOf(v))).append('}');
    }
    sb.append("}}");
    return sb.toString();
  }

  private static void field(StringBuilder sb, String name, String value) {
    if (sb.length() > 1) sb.append(',');
    sb.append(quote(name)).append(':').append(value == null ? "null" : quote(value));
  }

  private static String quote(String s) {
    StringBuilder sb = new StringBuilder("\"");
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"': sb.append("\\\""); break;
        case '\\': sb.append("\\\\"); break;
        case '\n': sb.append("\\n"); break;
        case '\r': sb.append("\\r"); break;
        case '\t': sb.append("\\t"); break;
        default:
          if (c < 0x20 || c == 0x2028 || c == 0x2029) sb.append(String.format("\\u%04x", (int) c));
          else sb.append(c);
      }
    }
    return sb.append('"').toString();
  }

  private static String hex(byte[] bytes) {
    StringBuilder sb = new StringBuilder(bytes.length * 2);
    for (byte b : bytes) sb.append(String.format("%02x", b & 0xff));
    return sb.toString();
  }
}
