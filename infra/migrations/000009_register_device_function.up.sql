-- A device's registration as one function call (docs/behaviour.md#devices, docs/decisions.md "A registration is one
-- PL/pgSQL call"). The statements are the ones push-register sent one by one before: the caregiver's and the token's
-- advisory locks, the upsert, the installation's rotation, the token's hand-over, the cap and the clean-up of old
-- disabled rows. Sent one by one, PostgreSQL parsed and planned each of them again at every registration, most of a
-- warm registration's time; PL/pgSQL keeps each statement's plan for the life of the connection.
--
-- Each statement of a VOLATILE PL/pgSQL function takes a snapshot of its own under READ COMMITTED, as separate
-- statements do: the upsert and the updates after the locks see every registration that committed while this one
-- waited for them. (One statement with data-modifying CTEs could not: all of its parts share the snapshot taken before
-- its locks were granted.)
--
-- SECURITY INVOKER (the default): it runs with the caller's rights and row security. The search_path is pinned and
-- every name qualified. The migrator revokes every routine of the schema from PUBLIC and the API roles after each
-- run; only the runtime role is granted EXECUTE, and the function refuses any other caller but the owner.
CREATE FUNCTION caregiver_push.register_push_device(
    caregiver uuid, device_token text, device_token_sha256 bytea, device_platform text, device_environment text,
    device_installation_id text, device_cap integer, disabled_kept integer,
    OUT device_id uuid, OUT replaced_count integer, OUT reassigned_count integer, OUT over_cap_count integer)
LANGUAGE plpgsql VOLATILE
SET search_path = pg_catalog, pg_temp
AS $register$
BEGIN
    -- Only the functions' role (and the schema's owner) may register. The migrator grants EXECUTE to nobody else, but
    -- a project that exposes the schema to Supabase's Data API by mistake grants every routine to its API roles: the
    -- call is then refused here, before it takes a lock (row security would refuse its writes anyway).
    IF NOT pg_has_role(current_user, 'caregiver_push_runtime', 'USAGE')
        AND NOT pg_has_role(current_user, (SELECT nspowner FROM pg_namespace WHERE nspname = 'caregiver_push'), 'USAGE')
    THEN
        RAISE EXCEPTION USING ERRCODE = 'insufficient_privilege',
            MESSAGE = 'register_push_device is for the role caregiver_push_runtime';
    END IF;

    -- The caregiver's lock first, then the token's, always in that order (the namespaces are
    -- PushDeviceRegistry.ownerLockNamespace and .tokenLockNamespace: "OWNR", "PUSH").
    PERFORM pg_advisory_xact_lock(1331121746, hashtext(caregiver::text));
    PERFORM pg_advisory_xact_lock(1347769160, hashtext(device_token));

    INSERT INTO caregiver_push.push_devices AS d
        (owner_type, owner_id, token, token_sha256, platform, environment, installation_id, is_enabled, last_seen_at)
    VALUES ('CAREGIVER', caregiver, device_token, device_token_sha256, device_platform, device_environment,
            device_installation_id, true, now())
    ON CONFLICT ON CONSTRAINT push_devices_owner_token_key DO UPDATE SET
        platform = EXCLUDED.platform,
        environment = EXCLUDED.environment,
        installation_id = COALESCE(EXCLUDED.installation_id, d.installation_id),
        is_enabled = true,
        disabled_reason = NULL,
        last_seen_at = now(),
        updated_at = now()
    RETURNING d.id INTO device_id;

    -- The caregiver's other devices of this installation (an app reinstalled gets a new token).
    replaced_count := 0;
    IF device_installation_id IS NOT NULL THEN
        UPDATE caregiver_push.push_devices AS d
        SET is_enabled = false, disabled_reason = 'REPLACED', updated_at = now()
        WHERE d.owner_type = 'CAREGIVER' AND d.owner_id = caregiver
          AND d.installation_id = device_installation_id AND d.id <> device_id AND d.is_enabled;
        GET DIAGNOSTICS replaced_count = ROW_COUNT;
    END IF;

    -- Other caregivers' devices holding this token: a phone belongs to whoever registered it last.
    UPDATE caregiver_push.push_devices AS d
    SET is_enabled = false, disabled_reason = 'TOKEN_REASSIGNED', updated_at = now()
    WHERE d.token_sha256 = device_token_sha256 AND d.token = device_token
      AND NOT (d.owner_type = 'CAREGIVER' AND d.owner_id = caregiver) AND d.is_enabled;
    GET DIAGNOSTICS reassigned_count = ROW_COUNT;

    -- The cap: the device just registered sorts first whatever the clocks say, then the most recently seen.
    UPDATE caregiver_push.push_devices AS d
    SET is_enabled = false, disabled_reason = 'REPLACED', updated_at = now()
    WHERE d.id IN (
        SELECT o.id FROM caregiver_push.push_devices AS o
        WHERE o.owner_type = 'CAREGIVER' AND o.owner_id = caregiver AND o.is_enabled
        ORDER BY o.id = device_id DESC, o.last_seen_at DESC, o.id
        OFFSET greatest(device_cap, 1));
    GET DIAGNOSTICS over_cap_count = ROW_COUNT;

    -- Only the caregiver's most recently disabled `disabled_kept` rows are kept.
    DELETE FROM caregiver_push.push_devices AS d
    WHERE d.id IN (
        SELECT o.id FROM caregiver_push.push_devices AS o
        WHERE o.owner_type = 'CAREGIVER' AND o.owner_id = caregiver AND NOT o.is_enabled
        ORDER BY o.updated_at DESC, o.id
        OFFSET disabled_kept);
END
$register$;

REVOKE ALL ON FUNCTION caregiver_push.register_push_device(uuid, text, bytea, text, text, text, integer, integer)
    FROM PUBLIC;
GRANT EXECUTE ON FUNCTION caregiver_push.register_push_device(uuid, text, bytea, text, text, text, integer, integer)
    TO caregiver_push_runtime;
