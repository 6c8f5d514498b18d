"""Checks ``_java.py`` (the Java collection behaviour the sticky assignors' results depend on)
against the real JDK: String.hashCode and compareTo, HashMap iteration order for member ids
(default and sized tables, across resizes) and HashSet<TopicPartition> ``iterator().next()``
through adds and removes. Skipped where no JDK is installed."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from kproto.consumer.classic.assignors._java import (
    JavaHashSet,
    java_str_key,
    java_string_hash,
    member_hash_order,
    topic_partition_hash,
)
from kproto.structs import TopicPartition

JAVA_SOURCE = r'''import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class JavaOrder {
    static final class TP {
        final String topic; final int partition;
        TP(String t, int p) { topic = t; partition = p; }
        @Override public int hashCode() { int r = 31 + partition; return 31 * r + Objects.hashCode(topic); }
        @Override public boolean equals(Object o) { return o instanceof TP && ((TP) o).topic.equals(topic) && ((TP) o).partition == partition; }
    }
    static String dec(String hex) {
        byte[] b = new byte[hex.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
        return new String(b, StandardCharsets.UTF_8);
    }
    static String enc(String s) {
        StringBuilder sb = new StringBuilder();
        for (byte x : s.getBytes(StandardCharsets.UTF_8)) sb.append(String.format("%02x", x));
        return sb.toString();
    }
    public static void main(String[] args) throws IOException {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        Set<TP> set = new HashSet<>();
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.split(" ");
            StringBuilder r = new StringBuilder();
            switch (f[0]) {
                case "map": {  // map <initialCapacity or 0> keys...
                    int cap = Integer.parseInt(f[1]);
                    Map<String, Integer> m = cap > 0 ? new HashMap<>(cap) : new HashMap<>();
                    for (int i = 2; i < f.length; i++) m.put(dec(f[i]), i);
                    for (String k : m.keySet()) r.append(enc(k)).append(' ');
                    break;
                }
                case "hash": r.append(dec(f[1]).hashCode()); break;
                case "sort": {
                    List<String> l = new ArrayList<>();
                    for (int i = 1; i < f.length; i++) l.add(dec(f[i]));
                    Collections.sort(l);
                    for (String k : l) r.append(enc(k)).append(' ');
                    break;
                }
                case "newset": set = new HashSet<>(); break;
                case "add": set.add(new TP(dec(f[1]), Integer.parseInt(f[2]))); break;
                case "remove": set.remove(new TP(dec(f[1]), Integer.parseInt(f[2]))); break;
                case "first": { TP t = set.iterator().next(); r.append(enc(t.topic)).append(' ').append(t.partition); break; }
            }
            out.println(r.toString().trim());
        }
    }
}
'''

ALPHABET = "abcxyz-_019" + "\u00e9\u4e2d\uff21" + "\U0001F600\U00010000"


def _hex(s: str) -> str:
    return s.encode("utf-8").hex()


def _unhex(h: str) -> str:
    return bytes.fromhex(h).decode("utf-8")


@pytest.fixture(scope="module")
def jdk(tmp_path_factory):
    javac, java = shutil.which("javac"), shutil.which("java")
    if not javac or not java:
        pytest.skip("no JDK on this machine")
    d = tmp_path_factory.mktemp("jdk")
    (d / "JavaOrder.java").write_text(JAVA_SOURCE, encoding="utf-8")
    subprocess.run([javac, "-encoding", "UTF-8", "JavaOrder.java"], cwd=d, check=True, timeout=120)

    def run(commands):
        done = subprocess.run([java, "-cp", str(d), "JavaOrder"], input="\n".join(commands) + "\n",
                              capture_output=True, text=True, encoding="utf-8", timeout=120, check=True)
        return done.stdout.splitlines()
    return run


def _random_id(rng: random.Random) -> str:
    if rng.random() < 0.5:  # realistic member ids
        return "consumer-{}-{:08x}".format(rng.randint(1, 99), rng.getrandbits(32))
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 8)))


def test_strings_and_hash_maps_match_the_jdk(jdk):
    rng = random.Random(20261122)
    cases = []
    for _ in range(150):
        ids = list(dict.fromkeys(_random_id(rng) for _ in range(rng.randint(1, 60))))
        capacity = rng.choice([0, 0, len(ids), 3, 64])
        cases.append((ids, capacity))
    commands = []
    for ids, capacity in cases:
        commands.append("map {} {}".format(capacity, " ".join(_hex(i) for i in ids)))
        commands.append("sort " + " ".join(_hex(i) for i in ids))
        commands.append("hash " + _hex(ids[0]))
    out = jdk(commands)
    for n, (ids, capacity) in enumerate(cases):
        java_map, java_sorted, java_hash = out[3 * n: 3 * n + 3]
        ours = member_hash_order(ids, capacity or 16)
        assert [_unhex(h) for h in java_map.split()] == ours
        assert [_unhex(h) for h in java_sorted.split()] == sorted(ids, key=java_str_key)
        assert int(java_hash) == java_string_hash(ids[0])


def test_hash_set_first_element_matches_the_jdk(jdk):
    rng = random.Random(7)
    commands, expected = [], []
    for _ in range(40):
        topics = [_random_id(rng) for _ in range(rng.randint(1, 4))]
        ours: JavaHashSet = JavaHashSet(topic_partition_hash)
        commands.append("newset")
        present = []
        for _ in range(rng.randint(1, 80)):
            if present and rng.random() < 0.35:
                tp = present.pop(rng.randrange(len(present)))
                ours.discard(tp)
                commands.append("remove {} {}".format(_hex(tp.topic), tp.partition))
            else:
                tp = TopicPartition(rng.choice(topics), rng.randint(0, 40))
                if tp not in ours:
                    present.append(tp)
                ours.add(tp)
                commands.append("add {} {}".format(_hex(tp.topic), tp.partition))
            if present:
                commands.append("first")
                expected.append(ours.first())
    out = [line for line in jdk(commands) if line]
    assert [TopicPartition(_unhex(t), int(p)) for t, p in (line.split() for line in out)] == expected
