internal import Foundation
internal import Hummingbird
internal import Logging
internal import SignInWithApple
internal import WebAuthnCore
internal import _WebAuthnCrypto

/// Sign in with Apple: the server-to-server notifications.
extension WebAuthnRoutes {
    // MARK: Notifications

    /// `POST /apple/notifications`: Apple's server-to-server events, verified, acted on
    /// idempotently (a duplicate answers 200 and changes nothing more).
    func appleNotification<Context: RequestContext>(_ request: Request, _ context: Context, _ apple: AppleConfiguration) async throws -> Response {
        let buffer = try await HTTP.collect(request, limit: AppleNotification.maxBodySize)
        let note = try await apple.signIn.verifyNotification(body: Array(buffer.readableBytesView))
        if let time = note.eventTime, time > now.addingTimeInterval(apple.signIn.configuration.leeway) {
            throw WebAuthnError(.appleNotificationInvalid, "the event_time is in the future")
        }
        // Duplicates (Apple delivers some twice; a captured one may be replayed): the key of each
        // notification is kept for longer than a notification is accepted (a day, from its iat),
        // whatever it led to, and a later delivery is answered without acting. Red team: one that
        // arrived while the Apple ID was not linked was not remembered, and replayed after the user
        // linked it again (a consent-revoked without event_time) it unlinked the new link and
        // deleted the account. (Two deliveries at the same instant may both act: every action is
        // idempotent.)
        let seen = Digest.sha256(Array(("apple notification " + note.dedupeKey).utf8))
        if try await engine.isSingleUsePending(.appleNotification, key: seen) {
            audit("apple_notification", request, context, ["type": .string(note.type), "duplicate": "true"])
            return HTTP.ok()
        }
        let outcome = try await act(on: note, apple)
        do {
            try await engine.storeSingleUse(
                .appleNotification, key: seen, binding: nil, lifetime: AppleNotification.dedupeLifetime(leeway: apple.signIn.configuration.leeway))
        } catch {
            // Handled already: answer 200 all the same (the actions are idempotent; only the dedupe is lost).
            context.logger.warning("a notification's dedupe key was not kept", metadata: ["code": .string(error.code.rawValue)])
        }
        var metadata: Logger.Metadata = ["type": .string(note.type)]
        switch outcome {
        case .notLinked: metadata["linked"] = "false"
        case .superseded: metadata["superseded"] = "true"
        case .applied(let handle): metadata["account"] = .string(Audit.hash(handle))
        }
        audit("apple_notification", request, context, metadata)
        return HTTP.ok()
    }

    /// What a notification led to.
    enum NotificationOutcome {
        /// The Apple ID is linked to no account: nothing to do.
        case notLinked
        /// Dated before the identity's last change, or before it was (re)linked: nothing to do.
        case superseded
        /// Applied to the account of this handle.
        case applied([UInt8])
    }

    /// Applies a verified notification to the identity it names, judged on the identity as read
    /// and acted on only while it is still that: a sign-in between the two (which supersedes a
    /// revocation dated before it) makes it read and judge again. Red team, fourteenth pass: a late
    /// `consent-revoked`, judged current, unlinked the identity just after a newer sign-in, whose
    /// token was then held by nobody.
    private func act(on note: AppleNotification, _ apple: AppleConfiguration) async throws -> NotificationOutcome {
        for _ in 0..<8 {
            guard let linked = try await apple.identities.identity(provider: Self.appleProvider, subject: note.sub) else { return .notLinked }
            if let outcome = try await act(on: note, linked, apple) { return outcome }
        }
        throw WebAuthnError(.concurrentUpdate, "the Apple ID's identity kept changing while the notification was applied")
    }

    /// Whether an `email-enabled` or `email-disabled` dated `time` is news for `linked`: dated no
    /// earlier than the last email change applied, and not before this link was made (it is about
    /// an earlier consent). One dated before a later sign-in still says whether mail is
    /// delivered (a sign-in that brings another address dates a change itself).
    static func emailChangeApplies(at time: Date, to linked: LinkedIdentity) -> Bool {
        time >= linked.createdAt && linked.emailChangedAt.map { time >= $0 } ?? true
    }

    /// ``act(on:_:)`` on the identity as read; nil when it changed before the action.
    private func act(on note: AppleNotification, _ linked: LinkedIdentity, _ apple: AppleConfiguration) async throws -> NotificationOutcome? {
        let identities = apple.identities
        // An event older than the record's last change was applied already, or superseded: a
        // revocation or deletion from before the identity was (re)linked, or before the user last
        // signed in with it (which took a consent given again), is not about this link. Red team,
        // thirteenth pass: a consent-revoked Apple delivered late, after the user had signed in
        // again, deleted the account (only the link's creation was compared). Without an
        // `event_time`, the event happened before the notification was issued: its `iat` (whole
        // seconds, so a second is added) bounds it (re-check of round 28: one issued before a
        // sign-in, delivered after it, unlinked the new link and deleted the account).
        let latest = note.eventTime ?? note.issuedAt.addingTimeInterval(1)
        let superseded =
            switch note.event {
            case .consentRevoked, .accountDeleted: latest < linked.updatedAt
            case .emailEnabled, .emailDisabled: !Self.emailChangeApplies(at: latest, to: linked)
            case .other: false
            }
        if superseded { return .superseded }
        switch note.event {
        case .emailDisabled, .emailEnabled:
            // Over the refresh tokens it was read with: one a sign-in stores meanwhile stays. The
            // record's time stays the last link or sign-in's: it is what a revocation is judged
            // against, and only a sign-in gives consent again. Red team, round 28: an email event
            // stamped its own time (the server's clock when it had none), and a consent-revoked
            // dated before that, delivered after it, was judged superseded and ignored. The change
            // is dated in `emailChangedAt` instead: an older one delivered after it changes nothing
            // (they were applied in the order they arrived).
            _ = try await updateIdentity(linked, in: identities) { linked in
                guard Self.emailChangeApplies(at: latest, to: linked) else { return false }
                linked.emailEnabled = note.event == .emailEnabled
                linked.emailChangedAt = latest
                // A sign-in since brought the address from its token: newer than this event's.
                if latest >= linked.updatedAt {
                    linked.email = note.email ?? linked.email
                    linked.isPrivateEmail = note.isPrivateEmail ?? linked.isPrivateEmail
                }
                return true
            }
        case .consentRevoked, .accountDeleted:
            guard try await identities.unlink(provider: Self.appleProvider, subject: note.sub, ifRefreshTokenIs: linked.refreshToken) != nil else {
                return nil
            }
            _ = try await sessions.store.deleteSessions(userHandle: linked.userHandle)
            // The account goes too when nothing else signs it in: nobody could sign in to it again,
            // and its name would stay taken (red team: consent revoked for an account whose only
            // passkey had been deleted; signing in with Apple again makes a new account).
            let credentials = try await engine.credentials.credentials(forUser: linked.userHandle)
            let others = try await identities.identities(forUser: linked.userHandle)
            if credentials.isEmpty && others.isEmpty { _ = try await accounts.deleteAccount(handle: linked.userHandle) }
        case .other:
            break
        }
        return .applied(linked.userHandle)
    }
}
