// Schedules as people say them: "every 30 min", "every day at 09:00",
// "once on 1 May 2026, 09:00"; a cron expression the page cannot put in words
// is shown as it is. The types are the scheduler's: delay, interval, at, cron.
// The words are the page's (gateway/i18n/web/chat.json, "schedule.*"); the
// English ones are kept here too, so that the module says the same when it
// is used without the page's texts loaded.

import { t } from "./i18n.js";
import { localTime } from "./status.js";

const ENGLISH = {
  "schedule.sep": ", ",
  "schedule.day.0": "Sunday",
  "schedule.day.1": "Monday",
  "schedule.day.2": "Tuesday",
  "schedule.day.3": "Wednesday",
  "schedule.day.4": "Thursday",
  "schedule.day.5": "Friday",
  "schedule.day.6": "Saturday",
  "schedule.one_day": "{n} day",
  "schedule.days": "{n} days",
  "schedule.hours": "{n} h",
  "schedule.minutes": "{n} min",
  "schedule.seconds": "{n} s",
  "schedule.every_day": "every day",
  "schedule.every_hour": "every hour",
  "schedule.every_minute": "every minute",
  "schedule.every": "every {duration}",
  "schedule.every_n_min": "every {n} min",
  "schedule.hourly_at": "every hour at :{mm}",
  "schedule.every_n_h_at": "every {n} h at :{mm}",
  "schedule.daily_at": "every day at {at}",
  "schedule.weekdays": "on weekdays",
  "schedule.weekends": "at weekends",
  "schedule.on_days": "on {days}",
  "schedule.days_at": "{days} at {at}",
  "schedule.monthly_at": "monthly on day {day} at {at}",
  "schedule.once_after": "once, {duration} after it was made",
  "schedule.once_at": "once, {when}",
  "schedule.cron": "cron “{expression}”",
  "schedule.zone": "{words} ({zone})",
};

// the page's text for `key`, or the English one when the page has none
function say(key, params = {}) {
  const text = t(key, params);
  if (text !== key) return text;
  return ENGLISH[key].replace(/\{(\w+)\}/g, (whole, name) => (name in params ? String(params[name]) : whole));
}

const list = (items) => items.join(say("schedule.sep"));

export function duration(secs) {
  const s = Number(secs);
  if (!Number.isFinite(s)) return "?";
  const units = [[86400, "days"], [3600, "hours"], [60, "minutes"]];
  for (const [size, name] of units) {
    if (s >= size && s % size === 0) {
      const n = s / size;
      return say(name === "days" && n === 1 ? "schedule.one_day" : `schedule.${name}`, { n });
    }
  }
  return say("schedule.seconds", { n: s });
}

function every(secs) {
  const s = Number(secs);
  if (s === 86400) return say("schedule.every_day");
  if (s === 3600) return say("schedule.every_hour");
  if (s === 60) return say("schedule.every_minute");
  return say("schedule.every", { duration: duration(s) });
}

const pad = (n) => String(n).padStart(2, "0");
const isNum = (v) => /^\d+$/.test(v);

function weekdays(field) {
  if (field === "1-5") return say("schedule.weekdays");
  if (field === "0,6" || field === "6,0" || field === "6-7" || field === "sat,sun") return say("schedule.weekends");
  const names = field.split(",").map((d) => (isNum(d) ? say(`schedule.day.${Number(d) % 7}`) : null));
  return names.every(Boolean) ? say("schedule.on_days", { days: list(names) }) : null;
}

export function describeCron(expression) {
  const fields = String(expression).trim().split(/\s+/);
  if (fields.length !== 5) return null;
  const [min, hour, dom, mon, dow] = fields;
  const step = /^\*\/(\d+)$/;
  if (mon !== "*") return null;
  if (step.test(min) && hour === "*" && dom === "*" && dow === "*") {
    return say("schedule.every_n_min", { n: step.exec(min)[1] });
  }
  if (min === "*" && hour === "*" && dom === "*" && dow === "*") return say("schedule.every_minute");
  if (isNum(min) && hour === "*" && dom === "*" && dow === "*") return say("schedule.hourly_at", { mm: pad(min) });
  if (isNum(min) && step.test(hour) && dom === "*" && dow === "*") {
    return say("schedule.every_n_h_at", { n: step.exec(hour)[1], mm: pad(min) });
  }
  if (!isNum(min) || !/^\d+(,\d+)*$/.test(hour)) return null;
  const at = list(hour.split(",").map((h) => `${pad(h)}:${pad(min)}`));
  if (dom === "*" && dow === "*") return say("schedule.daily_at", { at });
  if (dom === "*") {
    const days = weekdays(dow);
    return days ? say("schedule.days_at", { days, at }) : null;
  }
  if (isNum(dom) && dow === "*") return say("schedule.monthly_at", { day: dom, at });
  return null;
}

export function describeSchedule(schedule) {
  if (!schedule || typeof schedule !== "object") return "–";
  const zoned = (words) => (schedule.timezone ? say("schedule.zone", { words, zone: schedule.timezone }) : words);
  switch (schedule.type) {
    case "delay":
      return say("schedule.once_after", { duration: duration(schedule.seconds) });
    case "interval":
      return every(schedule.seconds);
    case "at":
      return zoned(say("schedule.once_at", { when: localTime(schedule.at, true) }));
    case "cron": {
      const words = describeCron(schedule.expression);
      return zoned(words || say("schedule.cron", { expression: schedule.expression }));
    }
    default:
      return String(schedule.type);
  }
}
