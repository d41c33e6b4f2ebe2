import Foundation
import Testing
import _WebAuthnCrypto

#if canImport(Glibc)
    import Glibc
#endif

/// `SecureRandom`: OpenSSL's CSPRNG, small requests served from a pool that one `RAND_bytes`
/// call fills (issue 13).
@Suite("Secure random bytes", .serialized)
struct SecureRandomTests {
    @Test("every length is served, from the pool or directly; no two values repeat, across refills too")
    func lengthsAndDistinctValues() {
        for count in [0, 1, 15, 16, 32, 63, 64, 65, 1000, 5000] {
            #expect(SecureRandom.bytes(count).count == count)
        }
        // 40,000 values of 16 bytes: about 160 refills of the pool, with requests that straddle them.
        var seen = Set<[UInt8]>()
        for index in 0..<40_000 {
            let value = SecureRandom.bytes(index % 3 == 0 ? 16 : index % 3 == 1 ? 17 : 31)
            #expect(seen.insert(Array(value.prefix(16))).inserted)
        }
        // Not all zero: the pool hands out bytes, not the zeros it leaves behind.
        #expect(SecureRandom.bytes(32) != [UInt8](repeating: 0, count: 32))
    }

    @Test("secrets come from the private generator, never the pool: drawing one leaves the pool as it was")
    func secretsBesideThePool() {
        _ = SecureRandom.bytes(16)
        var secrets = Set<[UInt8]>()
        for _ in 0..<1_000 {
            let secret = SecureRandom.secret(32)
            #expect(secret.count == 32 && secret != [UInt8](repeating: 0, count: 32))
            secrets.insert(secret)
        }
        #expect(secrets.count == 1_000)
        // 5,000 secrets of 32 bytes drawn from the pool would have filled it about forty times; the
        // other suites running at once fill it a few times at most in the same moment (this suite's
        // tests run one at a time).
        let before = SecureRandom.poolFills
        for _ in 0..<5_000 { _ = SecureRandom.secret(32) }
        #expect(SecureRandom.poolFills - before < 12)
    }

    @Test("small requests share a fill of the pool instead of a RAND_bytes call each")
    func poolAmortizes() {
        let before = SecureRandom.poolFills
        for _ in 0..<12_800 { _ = SecureRandom.bytes(32) }
        let fills = SecureRandom.poolFills - before
        // 12,800 × 32 bytes is 100 fills of 4 KiB; other tests running at once add a few.
        #expect(fills >= 100)
        #expect(fills < 1_000, "\(fills) fills for 12,800 requests")
    }

    @Test("eight threads at once never receive the same bytes")
    func concurrentDraws() async {
        let values = await withTaskGroup(of: [[UInt8]].self) { group in
            for _ in 0..<8 {
                group.addTask { (0..<2_000).map { _ in SecureRandom.bytes(32) } }
            }
            var all: [[UInt8]] = []
            for await part in group { all += part }
            return all
        }
        #expect(values.count == 16_000)
        #expect(Set(values).count == values.count)
    }

    @Test("a child made by fork does not hand out the bytes its parent hands out next")
    func forkedChildDrawsItsOwn() throws {
        _ = SecureRandom.bytes(32)  // the pool is in use: most of its bytes are still to be handed out
        _ = SecureRandom.bytes(100)  // and this thread has OpenSSL's generator of its own already
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        let pid = fork()
        if pid == 0 {
            let child = SecureRandom.bytes(32)
            _ = child.withUnsafeBytes { write(fds[1], $0.baseAddress, 32) }
            _exit(0)
        }
        try #require(pid > 0)
        close(fds[1])
        defer {
            close(fds[0])
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        let parent = SecureRandom.bytes(32)
        // The child's answer, within 30 s: a child that found the pool's lock taken by a thread
        // that did not come along would wait forever (the fork handlers prevent it).
        var child = [UInt8](repeating: 0, count: 32)
        var received = 0
        let deadline = Date().addingTimeInterval(30)
        while received < 32, Date() < deadline {
            var poll = pollfd(fd: fds[0], events: Int16(POLLIN), revents: 0)
            guard Glibc.poll(&poll, 1, 500) >= 0 else { break }
            guard poll.revents != 0 else { continue }
            let n = child.withUnsafeMutableBytes { read(fds[0], $0.baseAddress! + received, 32 - received) }
            if n <= 0 { break }
            received += n
        }
        if received < 32 { kill(pid, SIGKILL) }
        #expect(received == 32, "the child did not answer")
        #expect(child != parent, "parent and child handed out the same bytes")
    }
}
