// Schedules as people say them: "every 30 min", "every day at 09:00",
// "once on 1 May 2026, 09:00"; a cron expression the page cannot put in words
// is shown as it is. The types are the scheduler's: delay, interval, at, cron.

import { localTime } from "./status.js";

const DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

export function duration(secs) {
  const s = Number(secs);
  if (!Number.isFinite(s)) return "?";
  const units = [[86400, "day"], [3600, "h"], [60, "min"]];
  for (const [size, name] of units) {
    if (s >= size && s % size === 0) {
      const n = s / size;
      return name === "day" ? `${n} day${n === 1 ? "" : "s"}` : `${n} ${name}`;
    }
  }
  return `${s} s`;
}

function every(secs) {
  const s = Number(secs);
  if (s === 86400) return "every day";
  if (s === 3600) return "every hour";
  if (s === 60) return "every minute";
  return `every ${duration(s)}`;
}

const pad = (n) => String(n).padStart(2, "0");
const isNum = (v) => /^\d+$/.test(v);

function weekdays(field) {
  if (field === "1-5") return "on weekdays";
  if (field === "0,6" || field === "6,0" || field === "6-7" || field === "sat,sun") return "at weekends";
  const names = field.split(",").map((d) => (isNum(d) ? DAYS[Number(d) % 7] : null));
  return names.every(Boolean) ? `on ${names.join(", ")}` : null;
}

export function describeCron(expression) {
  const fields = String(expression).trim().split(/\s+/);
  if (fields.length !== 5) return null;
  const [min, hour, dom, mon, dow] = fields;
  const step = /^\*\/(\d+)$/;
  if (mon !== "*") return null;
  if (step.test(min) && hour === "*" && dom === "*" && dow === "*") return `every ${step.exec(min)[1]} min`;
  if (min === "*" && hour === "*" && dom === "*" && dow === "*") return "every minute";
  if (isNum(min) && hour === "*" && dom === "*" && dow === "*") return `every hour at :${pad(min)}`;
  if (isNum(min) && step.test(hour) && dom === "*" && dow === "*") {
    return `every ${step.exec(hour)[1]} h at :${pad(min)}`;
  }
  if (!isNum(min) || !/^\d+(,\d+)*$/.test(hour)) return null;
  const at = hour.split(",").map((h) => `${pad(h)}:${pad(min)}`).join(", ");
  if (dom === "*" && dow === "*") return `every day at ${at}`;
  if (dom === "*") {
    const days = weekdays(dow);
    return days ? `${days} at ${at}` : null;
  }
  if (isNum(dom) && dow === "*") return `monthly on day ${dom} at ${at}`;
  return null;
}

export function describeSchedule(schedule) {
  if (!schedule || typeof schedule !== "object") return "–";
  const zone = schedule.timezone ? ` (${schedule.timezone})` : "";
  switch (schedule.type) {
    case "delay":
      return `once, ${duration(schedule.seconds)} after it was made`;
    case "interval":
      return every(schedule.seconds);
    case "at":
      return `once, ${localTime(schedule.at, true)}${zone}`;
    case "cron": {
      const words = describeCron(schedule.expression);
      return words ? `${words}${zone}` : `cron “${schedule.expression}”${zone}`;
    }
    default:
      return String(schedule.type);
  }
}
