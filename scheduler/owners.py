"""Who may see and change a job: the caller of a management request.

A job created at run time belongs to the sender who created it (its
`JobOwner`, stored with the job). A chat user sees and manages only their own
jobs; admins (the access policy's `gateway.admins`) and the operator (the
`picobot jobs` CLI, the web UI's /api/ops/jobs) see and manage every job.
Config and built-in jobs, and runtime jobs stored before owners were
recorded, have no owner: only admins and the operator reach them.

A job a caller may not manage is, to that caller, a job that does not exist:
the refusal never says whose it is or what it does.
"""

from __future__ import annotations

from dataclasses import dataclass

from storage.sql.jobs import JobOwner, JobRecord, JobSource

__all__ = ["OPERATOR", "JobCaller"]


@dataclass(frozen=True, slots=True)
class JobCaller:
    """`owner` None: the operator (never a chat user)."""

    owner: JobOwner | None
    admin: bool

    @classmethod
    def sender(cls, channel: str, sender_id: str, *, admin: bool) -> JobCaller:
        return cls(JobOwner(channel, sender_id), admin)

    def may_manage(self, record: JobRecord) -> bool:
        if self.admin:
            return True
        return (
            record.source is JobSource.RUNTIME
            and record.owner is not None
            and record.owner == self.owner
        )


OPERATOR = JobCaller(None, admin=True)
