-- A job's owner is checked by a trigger that runs only for jobs of another user than the
-- default one, in place of the foreign key jobs.user_id -> users.id.
--
-- The foreign key cost every INSERT INTO jobs a queued check at the end of the statement (a
-- lookup and a row lock of users 1 for nearly every job): about 15 % of the server's time
-- for a backend that inserts jobs one statement each. The rules stay those of the foreign key:
--   * a job's user_id is NULL or the id of a user; a job of an unknown user is refused with
--     SQLSTATE 23503 (foreign_key_violation), as before;
--   * a user that owns jobs cannot be deleted, nor its id changed;
--   * the default user (id 1), which owns every job enqueued without one, cannot be deleted.
-- A job of another user locks its user's row (FOR KEY SHARE), as the foreign key did, so a
-- concurrent delete of that user waits for the insert and then sees its job.

ALTER TABLE jobs DROP CONSTRAINT jobs_user_id_fkey;

CREATE FUNCTION jobdesk_check_job_user() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM users WHERE id = NEW.user_id FOR KEY SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'insert or update on table "jobs" violates the owner check: user % does not exist',
            NEW.user_id
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Key (user_id)=(%s) is not present in table "users".', NEW.user_id),
                  TABLE = 'jobs', COLUMN = 'user_id';
    END IF;
    RETURN NEW;
END $$;

-- Jobs of the default user (nearly all of them) skip the trigger through its WHEN clause.
CREATE TRIGGER jobs_user_check BEFORE INSERT OR UPDATE OF user_id ON jobs
    FOR EACH ROW WHEN (NEW.user_id <> 1) EXECUTE FUNCTION jobdesk_check_job_user();

CREATE FUNCTION jobdesk_keep_job_owners() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.id = OLD.id THEN
        RETURN NEW;
    END IF;
    IF OLD.id = 1 THEN
        RAISE EXCEPTION 'the default user (id 1) owns every job enqueued without a user; it cannot be %',
            CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'renumbered' END
            USING ERRCODE = 'foreign_key_violation', TABLE = 'users';
    END IF;
    IF EXISTS (SELECT 1 FROM jobs WHERE user_id = OLD.id) THEN
        RAISE EXCEPTION 'user % owns jobs; it cannot be %', OLD.id,
            CASE TG_OP WHEN 'DELETE' THEN 'deleted' ELSE 'renumbered' END
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Key (id)=(%s) is still referenced from table "jobs".', OLD.id),
                  TABLE = 'users';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END $$;

CREATE TRIGGER users_keep_job_owners BEFORE DELETE OR UPDATE OF id ON users
    FOR EACH ROW EXECUTE FUNCTION jobdesk_keep_job_owners();
