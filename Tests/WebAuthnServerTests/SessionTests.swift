import Foundation
import Testing
@testable import WebAuthnServer

@Suite("Browser sessions")
struct SessionTests {
    @Test("the session table is bounded: new clients evict the oldest sessions")
    func bounded() {
        let sessions = SessionStore(capacity: 50)
        var first: String?
        for i in 0..<500 {
            let id = sessions.update(nil) { $0.pendingChallenge = [UInt8(i & 0xff)] }
            if i == 0 { first = id }
        }
        #expect(sessions.count == 50)
        #expect(sessions.session(first) == nil)
    }

    @Test("a pending challenge is taken once; an unknown cookie starts a new session")
    func challengeOnce() {
        let sessions = SessionStore()
        let id = sessions.update(nil) { $0.pendingChallenge = [1, 2, 3] }
        #expect(sessions.takeChallenge(id) == [1, 2, 3])
        #expect(sessions.takeChallenge(id) == nil)
        #expect(sessions.update("forged") { _ in } != "forged")
        sessions.end(id)
        #expect(sessions.session(id) == nil)
    }
}
