internal import Foundation
internal import Hummingbird
internal import SignInWithApple
internal import WebAuthnCore
internal import _WebAuthnEncoding
internal import _WebAuthnCrypto

/// An Apple refresh token as the server keeps it: sealed under the server secret, bound to its
/// identity's subject, with the client id it was issued to (the bundle ID of the native flow, the
/// Services ID of the web flow), so that it is revoked with that client id. An identity keeps the
/// latest token of each client id it signed in through (red team, thirteenth pass: a sign-in
/// through the app replaced the web flow's token, which was then never revoked). Tokens sealed
/// before the client id was kept open with none.
struct AppleRefreshToken: Sendable, Equatable {
    let token: String
    let clientID: String?

    /// The most client ids an identity keeps a token for.
    static let maxKept = 8
}

extension WebAuthnRoutes {
    /// The sealing key of refresh tokens, derived from the server secret.
    var refreshTokenKey: [UInt8] { Digest.hmacSHA256(key: configuration.secret, Array("apple refresh token".utf8)) }

    /// `refreshToken`, issued to `clientID`, sealed with the tokens of other client ids (or of
    /// none known) that `kept` (the identity's sealed tokens, if they open) holds: `0x02`, then for
    /// each token its client id (empty when not known), `0x00`, the token, `0x00` (Apple's tokens
    /// and client ids are printable).
    func sealRefreshToken(_ refreshToken: String, clientID: String, subject: String, keeping kept: [UInt8]? = nil) throws(WebAuthnError) -> [UInt8] {
        let others = kept.flatMap { try? openRefreshTokens($0, subject: subject) }?.filter { $0.clientID.map { !Bytes.sameUTF8($0, clientID) } ?? true } ?? []
        var plain: [UInt8] = [0x02]
        for entry in (others + [AppleRefreshToken(token: refreshToken, clientID: clientID)]).suffix(AppleRefreshToken.maxKept) {
            plain += Array((entry.clientID ?? "").utf8) + [0x00] + Array(entry.token.utf8) + [0x00]
        }
        return try Seal.seal(plain, key: refreshTokenKey, associated: Array("apple/\(subject)".utf8))
    }

    /// The tokens an identity's sealed value holds, oldest first; one sealed before the client id
    /// was kept is the token alone (printable, so never starting with `0x02`).
    func openRefreshTokens(_ sealed: [UInt8], subject: String) throws(WebAuthnError) -> [AppleRefreshToken] {
        let plain = try Seal.open(sealed, key: refreshTokenKey, associated: Array("apple/\(subject)".utf8))
        switch plain.first {
        case 0x02:
            let fields = plain.dropFirst().split(separator: 0x00, omittingEmptySubsequences: false).dropLast()
            guard fields.count % 2 == 0 else { throw WebAuthnError(.storageFailure, "a stored refresh token is unreadable") }
            return stride(from: fields.startIndex, to: fields.endIndex, by: 2).map { i in
                AppleRefreshToken(
                    token: String(decoding: fields[i + 1], as: UTF8.self), clientID: fields[i].isEmpty ? nil : String(decoding: fields[i], as: UTF8.self))
            }
        default:
            return [AppleRefreshToken(token: String(decoding: plain, as: UTF8.self), clientID: nil)]
        }
    }

    /// Revokes a refresh token at Apple, with the client id it was issued to. A token kept
    /// without one (sealed before it was kept) is sent with every client id: Apple refuses it
    /// (`apple_request_refused`) for the others, and an endpoint may answer 200 for a client id
    /// it was not issued to and revoke nothing, so the first 200 proves nothing. Red team,
    /// thirteenth pass: a token of the Services ID was "revoked" with the bundle ID, and still
    /// refreshed after the account was deleted.
    ///
    /// Apple answers 200 for a token it no longer holds valid; `invalid_grant` from every client
    /// id tried says the same, so there is nothing left to revoke and the deletion goes on (red
    /// team: an endpoint that answered so kept the account from ever being deleted). Any other
    /// refusal (`invalid_client`: the server's Apple credentials) is Apple's or the operator's to
    /// fix, not the user's: `apple_endpoint_unavailable` (502), with Apple's answer in the log,
    /// and the account stays.
    func revoke(_ refreshToken: AppleRefreshToken, _ apple: AppleConfiguration) async throws(WebAuthnError) {
        let client = try apple.signIn.tokenClient()
        let configured = apple.signIn.configuration.clientIDs
        let clientIDs = refreshToken.clientID.flatMap { id in configured.first { Bytes.sameUTF8($0, id) }.map { [$0] } } ?? configured
        var refusals: [WebAuthnError] = []
        var revoked = false
        for clientID in clientIDs {
            let outcome: WebAuthnError? = await Self.attempt { () async throws(WebAuthnError) in
                try await client.revoke(refreshToken: refreshToken.token, clientID: clientID)
            }
            guard let failure = outcome else {
                revoked = true
                continue
            }
            guard failure.code == .appleRequestRefused else { throw failure }
            refusals.append(failure)
        }
        guard !revoked, let last = refusals.last, !refusals.allSatisfy({ AppleTokenClient.refusal(of: $0) == "invalid_grant" }) else { return }
        throw WebAuthnError(.appleEndpointUnavailable, "Apple refused to revoke the refresh token: \(last.message)")
    }

    /// The refresh token a sign-in was just issued, when the sign-in failed after the code
    /// exchange: kept by the Apple ID's identity, if another sign-in linked one, else revoked.
    /// - Linked nowhere: revoked.
    /// - Linked, holding a token of the same client id (or one kept before client ids were): left
    ///   alone. Revoking a token ends the user's authorization of that client, the held token's
    ///   with it, and the held one is revoked when the account goes.
    /// - Linked, holding none of that client id: added to the identity's tokens (over those read,
    ///   as a sign-in adds one), so that the account's deletion revokes it. Red team, fourteenth
    ///   pass: the app's token of a link that lost to the same Apple ID's first sign-in through the
    ///   web flow was neither kept nor revoked, as the identity "held a token" (of the Services
    ///   ID): 17 to 21 rounds of 100.
    ///
    /// Best effort (the sign-in has failed anyway): a store or Apple failing leaves it. Red team,
    /// thirteenth pass: a link that found its account deleted, a new account whose name was taken,
    /// left the token unrevoked and held by nobody.
    func revokeUnheld(_ refreshToken: String?, of identity: AppleIdentityToken, _ apple: AppleConfiguration) async {
        guard let refreshToken else { return }
        let read: LinkedIdentity?
        do { read = try await apple.identities.identity(provider: Self.appleProvider, subject: identity.sub) } catch { return }
        func holdsItsClient(_ linked: LinkedIdentity) -> Bool {
            guard let sealed = linked.refreshToken else { return false }
            // One that does not open (another secret) cannot be told apart: kept, as before.
            guard let held = try? openRefreshTokens(sealed, subject: identity.sub) else { return true }
            return held.contains { $0.clientID.map { Bytes.sameUTF8($0, identity.audience) } ?? true }
        }
        if let linked = read {
            let kept: LinkedIdentity?
            do {
                kept = try await updateIdentity(linked, in: apple.identities) { (linked) throws(WebAuthnError) in
                    guard !holdsItsClient(linked) else { return false }
                    linked.refreshToken = try sealRefreshToken(
                        refreshToken, clientID: identity.audience, subject: identity.sub, keeping: linked.refreshToken)
                    return true
                }
            } catch { return }
            // Kept (added, or its client's held): nothing more. Unlinked meanwhile: revoked below.
            guard kept == nil else { return }
        }
        _ = await Self.attempt { () async throws(WebAuthnError) in
            try await revoke(AppleRefreshToken(token: refreshToken, clientID: identity.audience), apple)
        }
    }

    /// Takes back a link whose session ended before the link's sign-in was stored, with what used
    /// it meanwhile: another sign-in of the same Apple ID (the web flow, another device) may have
    /// found the link, signed in to the account and added its own token. So the identity's tokens
    /// are revoked, every one, and the account's sessions end, as the ending of the linking session
    /// (sign-out everywhere, most often) meant them to; a session stored after this finds the
    /// identity gone and ends itself (``appleSignedIn``). Red team, fourteenth pass: the link's
    /// token alone was revoked, the web flow's was lost, and its browser stayed signed in through
    /// the link taken back (4 rounds of 350 on PostgreSQL). In a rarer race, a single session's
    /// sign-out ending the linking session, this signs the account out everywhere: the safe side.
    func takeBack(_ identity: AppleIdentityToken, from handle: [UInt8], refreshToken: String?, _ apple: AppleConfiguration) async throws {
        // Unlinked only as read (still this account's): the Apple ID unlinked and linked to another
        // account in between is that account's (red team, fourteenth pass, second re-check).
        // Sign-ins that keep changing it do not keep it linked: the eighth read unlinks as it is.
        var removed: LinkedIdentity?
        for attempt in 0..<8 where removed == nil {
            guard let read = try await apple.identities.identity(provider: Self.appleProvider, subject: identity.sub), read.userHandle == handle else {
                break
            }
            removed =
                attempt < 7
                ? try await apple.identities.unlink(provider: Self.appleProvider, subject: identity.sub, ifRefreshTokenIs: read.refreshToken)
                : try await apple.identities.unlink(provider: Self.appleProvider, subject: identity.sub)
        }
        guard let removed else {
            await revokeUnheld(refreshToken, of: identity, apple)
            return
        }
        _ = try await sessions.store.deleteSessions(userHandle: handle)
        let held = removed.refreshToken.flatMap { try? openRefreshTokens($0, subject: identity.sub) } ?? []
        for token in held {
            _ = await Self.attempt { () async throws(WebAuthnError) in try await revoke(token, apple) }
        }
        if !held.contains(where: { $0.token == refreshToken }) { await revokeUnheld(refreshToken, of: identity, apple) }
    }

    /// Applies `change` to `read` and stores the result only while the stored refresh tokens are
    /// still those `read` holds (``LinkedIdentityStore/update(_:ifRefreshTokenIs:)``); when they
    /// changed, applies it again to the identity read anew, at most 8 times (`concurrent_update`
    /// after that). `change` answers false to store nothing. Returns the identity as stored, nil
    /// when it is no longer linked. Red team, thirteenth pass (re-check): two sign-ins of one Apple
    /// ID through different client ids at once each wrote back the tokens it had read, and one
    /// client id's token was then never revoked (10 to 18 rounds of 60); a notification changing
    /// the email wrote back the tokens it had read too.
    func updateIdentity(
        _ read: LinkedIdentity, in identities: any LinkedIdentityStore, _ change: (inout LinkedIdentity) throws(WebAuthnError) -> Bool
    ) async throws -> LinkedIdentity? {
        var current = read
        for _ in 0..<8 {
            var next = current
            guard try change(&next) else { return current }
            if try await identities.update(next, ifRefreshTokenIs: current.refreshToken) { return next }
            guard let again = try await identities.identity(provider: read.provider, subject: read.subject), again.userHandle == read.userHandle else {
                return nil
            }
            current = again
        }
        throw WebAuthnError(.concurrentUpdate, "the linked identity kept changing while it was written; try again")
    }

    /// Runs `body`, returning its error instead of throwing it.
    static func attempt(_ body: () async throws(WebAuthnError) -> Void) async -> WebAuthnError? {
        do { try await body() } catch { return error }
        return nil
    }

    // MARK: Account deletion

    /// Deletes the signed-in account: its Apple refresh tokens are revoked at Apple
    /// first (App Store rule), then the account, its credentials, identities and sessions go.
    /// An identity linked, or a token refreshed, while the deletion ran is reported by the
    /// deletion (``AccountStore/deleteAccount(handle:reportingIdentitiesIn:)``) and revoked then.
    ///
    /// Returns how many refresh tokens were not revoked, for the audit trail: a token sealed under
    /// another server secret (the secret was changed, or one instance runs with another) cannot be
    /// opened, so the deletion goes on without it (red team, twelfth pass: it failed with `500` and
    /// the account could not be deleted at all); a token reported by the deletion that Apple does
    /// not take is counted too, as the account is gone by then.
    @discardableResult
    func deleteAccount(_ handle: [UInt8]) async throws -> Int {
        guard let apple = configuration.apple else {
            _ = try await accounts.deleteAccount(handle: handle)
            _ = try await sessions.store.deleteSessions(userHandle: handle)
            return 0
        }
        var unrevoked = 0
        var handled = Set<[UInt8]>()
        // The tokens of Apple identities not handled yet: each revoked, or counted when `revokes`
        // answers false (it cannot be opened: sealed under another secret).
        func each(_ identities: [LinkedIdentity], _ revokes: (AppleRefreshToken) async throws -> Bool) async throws {
            for identity in identities where identity.provider == Self.appleProvider {
                guard let sealed = identity.refreshToken, handled.insert(sealed).inserted else { continue }
                guard let tokens = try? openRefreshTokens(sealed, subject: identity.subject) else {
                    unrevoked += 1
                    continue
                }
                for refresh in tokens where !(try await revokes(refresh)) { unrevoked += 1 }
            }
        }
        // First, while the account stays if Apple fails (the user can try again).
        try await each(try await apple.identities.identities(forUser: handle)) { refresh in
            try await revoke(refresh, apple)
            return true
        }
        let removed = try await accounts.deleteAccount(handle: handle, reportingIdentitiesIn: apple.identities) ?? []
        _ = try await sessions.store.deleteSessions(userHandle: handle)
        // Then those linked or refreshed since (red team, twelfth pass: an Apple ID linked while its
        // account was deleted went with it, its refresh token never revoked). The account is gone:
        // Apple failing now is counted, not thrown.
        try await each(removed) { refresh in await Self.attempt { () async throws(WebAuthnError) in try await revoke(refresh, apple) } == nil }
        return unrevoked
    }
}
