"""Where labels come from: teachers, query selection and label schedules."""

from prefrl.feedback.schedules import SCHEDULES, ScheduleConfig
from prefrl.feedback.selection import SELECTION_METHODS, select_pairs
from prefrl.feedback.teachers import (
    TEACHER_PRESETS,
    Answer,
    Query,
    ScriptedTeacher,
    Teacher,
    TeacherConfig,
    TeacherParams,
    scripted_labels,
)

__all__ = [
    "SCHEDULES",
    "SELECTION_METHODS",
    "TEACHER_PRESETS",
    "Answer",
    "Query",
    "ScheduleConfig",
    "ScriptedTeacher",
    "Teacher",
    "TeacherConfig",
    "TeacherParams",
    "scripted_labels",
    "select_pairs",
]
