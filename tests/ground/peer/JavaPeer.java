/*
 * The Java consumer of Kafka 4.4 as a peer of kproto in the tests: one member (or one
 * assign-mode reader) per process, driven by options, reporting as JSON lines on stdout.
 *
 * Compiled by the tests (tests/brokers/java_peer.py) with javac against the test ground's
 * classpath into tests/ground/target/; nothing built is committed.
 *
 * Modes (--mode):
 *   classic   KafkaConsumer, group.protocol=classic (--assignor range|cooperative-sticky|...)
 *   consumer  KafkaConsumer, group.protocol=consumer, KIP-848 (--assignor: the server
 *             assignor, uniform|range; none: the broker's default)
 *   share     KafkaShareConsumer, KIP-932 (--ack implicit|explicit, --ack-type for explicit)
 *   assign    KafkaConsumer without a group: reads --partitions (or every partition of
 *             --topics) from the beginning to the end offsets seen at the start, reports
 *             count, bytes, checksum and timings (JVM start-up apart), then exits
 *
 * Every output line is one JSON object with "event" and "mono_ns" (System.nanoTime(), which
 * on Linux reads CLOCK_MONOTONIC, as Python's time.monotonic_ns() does: the tests order a
 * peer's events with their own). Events: started, member, assigned, revoked, lost,
 * assignment, record, commit, commit_failed, ack, ack_committed, done, error, closed.
 * Hashes are CRC-32 (java.util.zip.CRC32, Python's zlib.crc32) of the key/value bytes, null
 * for a null key/value. The assign-mode checksum is the sum, modulo 2^64, of
 * crc32(key) + crc32(value) over the records read (a null counts as 0).
 *
 * Commands on stdin, one per line: "close" (or "stop", or end of input) leaves cleanly
 * (close() of the consumer: LeaveGroup / the leave heartbeat, acquired records released)
 * and exits 0; "halt" exits at once without closing (a crash; the tests also kill by pid);
 * "commit" commits what was read so far (classic/consumer, in any commit mode).
 */

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.zip.CRC32;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class JavaPeer {

    private static final PrintStream OUT = new PrintStream(
            new java.io.FileOutputStream(java.io.FileDescriptor.out), false, StandardCharsets.UTF_8);

    private final Map<String, String> opts;
    private volatile boolean stopping;
    private volatile boolean commitRequested;
    private volatile Runnable wakeup = () -> { };

    private JavaPeer(Map<String, String> opts) {
        this.opts = opts;
    }

    // --- output ----------------------------------------------------------------------------

    /** A JSON object builder: the few value kinds the events need, no library. */
    static final class Json {
        private final StringBuilder b = new StringBuilder("{");

        Json(String event) {
            raw("event", quote(event));
            raw("mono_ns", Long.toString(System.nanoTime()));
        }

        Json raw(String key, String json) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append(quote(key)).append(':').append(json);
            return this;
        }

        Json str(String key, String value) {
            return raw(key, value == null ? "null" : quote(value));
        }

        Json num(String key, long value) {
            return raw(key, Long.toString(value));
        }

        Json hash(String key, Long value) {
            return raw(key, value == null ? "null" : Long.toString(value));
        }

        static String quote(String s) {
            StringBuilder q = new StringBuilder("\"");
            for (char c : s.toCharArray()) {
                if (c == '"' || c == '\\') {
                    q.append('\\').append(c);
                } else if (c < 0x20) {
                    q.append(String.format("\\u%04x", (int) c));
                } else {
                    q.append(c);
                }
            }
            return q.append('"').toString();
        }

        static String partitions(Collection<TopicPartition> parts) {
            List<String> items = new ArrayList<>();
            for (TopicPartition tp : sorted(parts)) {
                items.add("[" + quote(tp.topic()) + "," + tp.partition() + "]");
            }
            return "[" + String.join(",", items) + "]";
        }

        void emit() {
            synchronized (OUT) {
                OUT.print(b.append('}'));
                OUT.print('\n');
                OUT.flush();
            }
        }
    }

    static List<TopicPartition> sorted(Collection<TopicPartition> parts) {
        List<TopicPartition> list = new ArrayList<>(parts);
        list.sort((a, b) -> a.topic().equals(b.topic())
                ? Integer.compare(a.partition(), b.partition()) : a.topic().compareTo(b.topic()));
        return list;
    }

    static Long crc(byte[] data) {
        if (data == null) {
            return null;
        }
        CRC32 c = new CRC32();
        c.update(data);
        return c.getValue();
    }

    // --- options ---------------------------------------------------------------------------

    private String opt(String name, String otherwise) {
        return opts.getOrDefault(name, otherwise);
    }

    private String need(String name) {
        String v = opts.get(name);
        if (v == null) {
            throw new IllegalArgumentException("--" + name + " is required for --mode " + opt("mode", "?"));
        }
        return v;
    }

    private List<String> topics() {
        return Arrays.asList(need("topics").split(","));
    }

    private Properties common() {
        Properties p = new Properties();
        p.put("bootstrap.servers", need("bootstrap"));
        p.put("client.id", opt("client-id", "java-peer"));
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("max.poll.records", opt("max-records", "50"));
        p.put("fetch.max.wait.ms", opt("fetch-max-wait-ms", "100"));
        p.put("retry.backoff.ms", "50");
        for (Map.Entry<String, String> e : opts.entrySet()) {
            if (e.getKey().startsWith("property.")) {  // --property k=v, any client setting
                p.put(e.getKey().substring("property.".length()), e.getValue());
            }
        }
        return p;
    }

    private void listenForCommands() {
        Thread t = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(
                    new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    switch (line.trim()) {
                        case "close":
                        case "stop":
                            stopping = true;
                            wakeup.run();
                            return;
                        case "halt":
                            Runtime.getRuntime().halt(1);
                            break;
                        case "commit":
                            commitRequested = true;
                            break;
                        default:
                            new Json("error").str("error", "unknown command: " + line).emit();
                    }
                }
            } catch (Exception e) {
                // stdin gone: as "close" below
            }
            stopping = true;
            wakeup.run();
        }, "java-peer-commands");
        t.setDaemon(true);
        t.start();
    }

    // --- classic and consumer (KIP-848) groups ---------------------------------------------

    private void runGroup(String protocol) {
        Properties p = common();
        p.put("group.id", need("group"));
        p.put("group.protocol", protocol);
        p.put("auto.offset.reset", opt("offset-reset", "earliest"));
        String commit = opt("commit", "sync");
        p.put("enable.auto.commit", Boolean.toString(commit.equals("auto")));
        if (opts.containsKey("instance-id")) {
            p.put("group.instance.id", opts.get("instance-id"));
        }
        String assignor = opts.get("assignor");
        if (protocol.equals("classic")) {
            // The consumer protocol refuses these settings (they are the broker's there).
            p.put("session.timeout.ms", opt("session-timeout-ms", "6000"));
            p.put("heartbeat.interval.ms", opt("heartbeat-interval-ms", "500"));
            p.put("partition.assignment.strategy", classicAssignor(assignor == null ? "range" : assignor));
        } else if (assignor != null && !assignor.equals("none")) {
            p.put("group.remote.assignor", assignor);
        }
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        wakeup = consumer::wakeup;
        if (stopping) {
            consumer.wakeup();
        }
        ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
            private void event(String kind, Collection<TopicPartition> parts) {
                new Json(kind).num("generation", consumer.groupMetadata().generationId())
                        .str("member_id", consumer.groupMetadata().memberId())
                        .raw("partitions", Json.partitions(parts)).emit();
            }

            @Override
            public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                event("revoked", parts);
            }

            @Override
            public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                event("assigned", parts);
            }

            @Override
            public void onPartitionsLost(Collection<TopicPartition> parts) {
                event("lost", parts);
            }
        };
        consumer.subscribe(topics(), listener);
        Set<TopicPartition> reported = null;
        String memberId = null;
        int reportedGeneration = -2;
        Map<TopicPartition, Long> pending = new HashMap<>();
        boolean uncommitted = false;
        while (!stopping) {
            ConsumerRecords<byte[], byte[]> records;
            try {
                records = consumer.poll(Duration.ofMillis(100));
            } catch (WakeupException e) {
                continue;
            }
            Set<TopicPartition> owned = consumer.assignment();
            int generation = consumer.groupMetadata().generationId();
            if (!owned.equals(reported) || generation != reportedGeneration) {
                reported = new HashSet<>(owned);
                reportedGeneration = generation;
                new Json("assignment").num("generation", generation)
                        .raw("partitions", Json.partitions(owned)).emit();
            }
            String id = consumer.groupMetadata().memberId();
            if (!id.isEmpty() && !id.equals(memberId)) {
                memberId = id;
                new Json("member").str("member_id", id).str("client_id", opt("client-id", "java-peer")).emit();
            }
            for (ConsumerRecord<byte[], byte[]> r : records) {
                new Json("record").str("topic", r.topic()).num("partition", r.partition())
                        .num("offset", r.offset()).hash("key_hash", crc(r.key()))
                        .hash("value_hash", crc(r.value())).emit();
                pending.put(new TopicPartition(r.topic(), r.partition()), r.offset() + 1);
            }
            boolean due = commit.equals("sync") && (!records.isEmpty() || uncommitted);
            if (due || commitRequested) {
                commitRequested = false;
                Map<TopicPartition, Long> covered = new HashMap<>();
                for (Map.Entry<TopicPartition, Long> e : pending.entrySet()) {
                    if (owned.contains(e.getKey())) {
                        covered.put(e.getKey(), e.getValue());
                    }
                }
                try {
                    consumer.commitSync();
                    Json j = new Json("commit");
                    List<String> items = new ArrayList<>();
                    for (TopicPartition tp : sorted(covered.keySet())) {
                        items.add("[" + Json.quote(tp.topic()) + "," + tp.partition() + "," + covered.get(tp) + "]");
                    }
                    j.raw("offsets", "[" + String.join(",", items) + "]").emit();
                    pending.clear();
                    uncommitted = false;
                } catch (WakeupException e) {
                    uncommitted = true;
                } catch (KafkaException e) {
                    // CommitFailedException, RebalanceInProgressException...: refused during
                    // a rebalance; committed again after the next poll.
                    new Json("commit_failed").str("error", e.getClass().getSimpleName() + ": " + e.getMessage()).emit();
                    uncommitted = true;
                }
            }
        }
        consumer.close();
        new Json("closed").emit();
    }

    private static String classicAssignor(String name) {
        switch (name) {
            case "range":
                return "org.apache.kafka.clients.consumer.RangeAssignor";
            case "roundrobin":
                return "org.apache.kafka.clients.consumer.RoundRobinAssignor";
            case "sticky":
                return "org.apache.kafka.clients.consumer.StickyAssignor";
            case "cooperative-sticky":
                return "org.apache.kafka.clients.consumer.CooperativeStickyAssignor";
            default:
                return name;  // a class name, or several, as Java takes them
        }
    }

    // --- share groups (KIP-932) ------------------------------------------------------------

    private void runShare() {
        Properties p = common();
        p.put("group.id", need("group"));
        String ackMode = opt("ack", "implicit");
        p.put("share.acknowledgement.mode", ackMode);
        AcknowledgeType ackType = AcknowledgeType.valueOf(opt("ack-type", "accept").toUpperCase());
        KafkaShareConsumer<byte[], byte[]> consumer = new KafkaShareConsumer<>(p);
        wakeup = consumer::wakeup;
        if (stopping) {
            consumer.wakeup();
        }
        consumer.setAcknowledgementCommitCallback((offsets, error) -> {
            List<String> items = new ArrayList<>();
            for (Map.Entry<TopicIdPartition, Set<Long>> e : offsets.entrySet()) {
                items.add("[" + Json.quote(e.getKey().topic()) + "," + e.getKey().partition() + ","
                        + new TreeSet<>(e.getValue()) + "]");
            }
            new Json("ack_committed").raw("offsets", "[" + String.join(",", items) + "]")
                    .str("error", error == null ? null : error.getClass().getSimpleName() + ": " + error.getMessage())
                    .emit();
        });
        consumer.subscribe(topics());
        boolean explicit = ackMode.equals("explicit");
        boolean syncCommit = opt("commit", "none").equals("sync");
        while (!stopping) {
            ConsumerRecords<byte[], byte[]> records;
            try {
                records = consumer.poll(Duration.ofMillis(100));
            } catch (WakeupException e) {
                continue;
            }
            for (ConsumerRecord<byte[], byte[]> r : records) {
                Optional<Short> count = r.deliveryCount();
                new Json("record").str("topic", r.topic()).num("partition", r.partition())
                        .num("offset", r.offset()).hash("key_hash", crc(r.key()))
                        .hash("value_hash", crc(r.value()))
                        .num("delivery_count", count.isPresent() ? count.get() : -1).emit();
                if (explicit) {
                    consumer.acknowledge(r, ackType);
                    new Json("ack").str("topic", r.topic()).num("partition", r.partition())
                            .num("offset", r.offset()).str("type", ackType.name()).emit();
                }
            }
            if (syncCommit && !records.isEmpty()) {
                try {
                    consumer.commitSync();  // outcomes also reach the callback above
                } catch (WakeupException e) {
                    // stopping: close() sends what is left
                }
            }
        }
        consumer.close();
        new Json("closed").emit();
    }

    // --- assign mode (the benchmark's reader) ----------------------------------------------

    private void runAssign(long mainNs) {
        Properties p = common();
        p.put("enable.auto.commit", "false");
        p.put("auto.offset.reset", "earliest");
        boolean report = Boolean.parseBoolean(opt("report-records", "false"));
        KafkaConsumer<byte[], byte[]> consumer = new KafkaConsumer<>(p);
        wakeup = consumer::wakeup;
        List<TopicPartition> parts = new ArrayList<>();
        if (opts.containsKey("partitions")) {
            for (String item : opts.get("partitions").split(",")) {
                int colon = item.lastIndexOf(':');
                parts.add(new TopicPartition(item.substring(0, colon), Integer.parseInt(item.substring(colon + 1))));
            }
        } else {
            for (String topic : topics()) {
                for (PartitionInfo info : consumer.partitionsFor(topic)) {
                    parts.add(new TopicPartition(topic, info.partition()));
                }
            }
        }
        consumer.assign(parts);
        consumer.seekToBeginning(parts);
        Map<TopicPartition, Long> end = consumer.endOffsets(parts);
        long readyNs = System.nanoTime();
        long records = 0;
        long bytes = 0;
        long checksum = 0;
        long firstNs = -1;
        Set<TopicPartition> open = new HashSet<>();
        for (TopicPartition tp : parts) {
            if (consumer.position(tp) < end.get(tp)) {
                open.add(tp);
            }
        }
        while (!open.isEmpty() && !stopping) {
            ConsumerRecords<byte[], byte[]> batch;
            try {
                batch = consumer.poll(Duration.ofMillis(100));
            } catch (WakeupException e) {
                break;
            }
            for (ConsumerRecord<byte[], byte[]> r : batch) {
                if (firstNs < 0) {
                    firstNs = System.nanoTime();
                }
                Long k = crc(r.key());
                Long v = crc(r.value());
                checksum += (k == null ? 0 : k) + (v == null ? 0 : v);
                bytes += (r.key() == null ? 0 : r.key().length) + (r.value() == null ? 0 : r.value().length);
                records++;
                if (report) {
                    new Json("record").str("topic", r.topic()).num("partition", r.partition())
                            .num("offset", r.offset()).hash("key_hash", k).hash("value_hash", v).emit();
                }
            }
            for (TopicPartition tp : batch.partitions()) {
                if (consumer.position(tp) >= end.get(tp)) {
                    open.remove(tp);
                }
            }
        }
        long doneNs = System.nanoTime();
        consumer.close();
        long closedNs = System.nanoTime();
        new Json("done").num("records", records).num("bytes", bytes)
                .raw("checksum", Long.toUnsignedString(checksum))
                .num("setup_ms", (readyNs - mainNs) / 1_000_000)
                .num("first_record_ms", firstNs < 0 ? -1 : (firstNs - readyNs) / 1_000_000)
                .num("read_ms", (doneNs - readyNs) / 1_000_000)
                .num("read_ns", doneNs - readyNs)
                .num("close_ms", (closedNs - doneNs) / 1_000_000).emit();
    }

    // --- main ------------------------------------------------------------------------------

    private static Map<String, String> parse(String[] args) {
        Map<String, String> opts = new HashMap<>();
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (!a.startsWith("--") || i + 1 >= args.length) {
                throw new IllegalArgumentException("expected --option value pairs, got " + a);
            }
            String v = args[++i];
            if (a.equals("--property")) {
                int eq = v.indexOf('=');
                opts.put("property." + v.substring(0, eq), v.substring(eq + 1));
            } else {
                opts.put(a.substring(2), v);
            }
        }
        return opts;
    }

    public static void main(String[] args) {
        long mainNs = System.nanoTime();
        // JVM start-up (process start to main), reported apart from the work.
        long jvmMs = ManagementFactory.getRuntimeMXBean().getUptime();
        int status = 0;
        try {
            JavaPeer peer = new JavaPeer(parse(args));
            String mode = peer.need("mode");
            new Json("started").str("mode", mode).num("jvm_ms", jvmMs)
                    .str("java_version", System.getProperty("java.version")).emit();
            peer.listenForCommands();
            switch (mode) {
                case "classic":
                case "consumer":
                    peer.runGroup(mode);
                    break;
                case "share":
                    peer.runShare();
                    break;
                case "assign":
                    peer.runAssign(mainNs);
                    break;
                default:
                    throw new IllegalArgumentException("unknown --mode " + mode);
            }
        } catch (Throwable t) {
            new Json("error").str("error", t.getClass().getName() + ": " + t.getMessage()).emit();
            status = 2;
        }
        OUT.flush();
        System.exit(status);
    }
}
