"""A search-quality fixture: 300 memories (half English, half Chinese) of one
user and 60 queries, each with the key it must find in the top 5.

Sixty memories are the answers; the other 240 are plausible neighbours built
from templates that share words with them (places, foods, times, family), so
that a query has to pick the right one among similar entries.
"""

from __future__ import annotations

from typing import Final

# (namespace, key, content) — the answers
TARGETS: Final[list[tuple[str, str, str]]] = [
    ("preferences", "language", "Prefers replies in English, short and without emoji"),
    ("profile", "job", "Works as a backend engineer at a logistics company in Rotterdam"),
    ("profile", "allergy", "Allergic to peanuts and shellfish; carries an epinephrine pen"),
    ("tasks", "thesis", "Writing a master thesis about distributed consensus, deadline in June"),
    ("preferences", "coffee", "Drinks oat milk flat white, never sugar"),
    ("profile", "pet", "Has a golden retriever called Biscuit who is nine years old"),
    ("tasks", "marathon", "Training for the Berlin marathon in September, runs four times a week"),
    ("profile", "birthday", "Birthday is on 14 March"),
    ("preferences", "editor", "Uses Neovim with a Lua configuration for all coding"),
    ("tasks", "kitchen", "Renovating the kitchen; the contractor starts after the holidays"),
    ("profile", "daughter", "Daughter Emma plays the violin in the school orchestra"),
    ("preferences", "units", "Wants metric units and 24-hour clock times"),
    ("tasks", "mortgage", "Comparing mortgage offers from three banks before signing"),
    ("profile", "guitar", "Learning classical guitar, practising scales every evening"),
    ("preferences", "meetings", "Avoids meetings before ten in the morning"),
    ("tasks", "spanish", "Studying Spanish on weekends to prepare for a move to Valencia"),
    ("profile", "vegetarian", "Vegetarian for six years, eats eggs and cheese"),
    ("tasks", "photography", "Building a photography portfolio website with Hugo"),
    ("preferences", "travel", "Prefers night trains to flights for trips within Europe"),
    ("profile", "insomnia", "Struggles with insomnia and avoids caffeine after noon"),
    ("tasks", "kubernetes", "Migrating the company cluster from Docker Swarm to Kubernetes"),
    ("profile", "brother", "Brother Lucas lives in Montreal and works as a nurse"),
    ("preferences", "newsletter", "Reads a weekly newsletter about climate technology"),
    ("tasks", "budget", "Keeps a household budget spreadsheet and reviews it monthly"),
    ("profile", "telescope", "Owns a Dobsonian telescope and watches planets from the balcony"),
    ("preferences", "music", "Listens to jazz piano while working, especially Bill Evans"),
    ("tasks", "garden", "Planting tomatoes and basil in the allotment garden this spring"),
    ("profile", "chess", "Plays online chess every morning, rated around 1600"),
    ("preferences", "books", "Likes science fiction novels by Ursula Le Guin"),
    ("tasks", "visa", "Applying for a Canadian work visa, waiting for the biometrics appointment"),
    ("preferences", "zh-language", "用户希望用中文回答，语气简洁"),
    ("profile", "zh-job", "在杭州一家电商公司做产品经理"),
    ("profile", "zh-allergy", "对花粉过敏，春天需要吃抗过敏药"),
    ("tasks", "zh-exam", "正在准备明年三月的注册会计师考试"),
    ("preferences", "zh-tea", "喜欢喝普洱茶，不喝咖啡"),
    ("profile", "zh-cat", "养了一只橘猫，名字叫团团"),
    ("tasks", "zh-piano", "每周六下午带儿子去上钢琴课"),
    ("profile", "zh-hometown", "老家在四川成都，春节回家过年"),
    ("preferences", "zh-food", "不吃香菜，喜欢吃辣的川菜"),
    ("tasks", "zh-house", "打算明年在苏州买房，正在比较学区"),
    ("profile", "zh-wife", "妻子是小学语文老师"),
    ("preferences", "zh-sports", "每天早上去公园跑步五公里"),
    ("tasks", "zh-wedding", "十月份要参加大学同学的婚礼"),
    ("profile", "zh-car", "开一辆白色的电动汽车，常去充电站"),
    ("preferences", "zh-reading", "睡前喜欢看历史小说，尤其是三国"),
    ("tasks", "zh-python", "在自学Python数据分析，想转行做数据工程师"),
    ("profile", "zh-health", "有轻微的高血压，医生建议少吃盐"),
    ("preferences", "zh-movie", "周末喜欢看科幻电影"),
    ("tasks", "zh-trip", "计划国庆节去云南大理自驾游"),
    ("profile", "zh-parents", "父母住在老家，每周日晚上视频通话"),
    ("preferences", "zh-work", "习惯在晚上工作，效率比白天高"),
    ("tasks", "zh-loan", "每个月还房贷八千元"),
    ("profile", "zh-glasses", "近视六百度，戴隐形眼镜"),
    ("preferences", "zh-phone", "用安卓手机，不喜欢苹果系统"),
    ("tasks", "zh-english", "每天背五十个英语单词准备雅思"),
    ("profile", "zh-dog", "小时候被狗咬过，很怕大型犬"),
    ("preferences", "zh-music", "喜欢听周杰伦的老歌"),
    ("tasks", "zh-weight", "目标是年底前减重十斤"),
    ("profile", "zh-son", "儿子今年上小学二年级"),
    ("preferences", "zh-shopping", "网购主要用淘宝和京东"),
]

_PLACES = ["Rotterdam", "Berlin", "Valencia", "Montreal", "Lisbon", "Oslo", "Prague", "Vienna",
           "Dublin", "Milan"]  # fmt: skip
_THINGS = [
    "booked a hotel near the station in {p}",
    "wants restaurant tips for a weekend in {p}",
    "a friend from {p} visits in the summer",
    "asked about museum opening hours in {p}",
    "has a conference in {p} next autumn",
    "bought a guidebook about {p}",
    "compared train tickets to {p}",
    "asked for the weather forecast in {p}",
    "keeps a list of cafes in {p}",
    "wants to learn the history of {p}",
    "looked up bike rentals in {p}",
    "plans a day trip from {p} to the coast",
]
_ZH_PLACES = ["北京", "上海", "广州", "深圳", "西安", "南京", "武汉", "厦门", "青岛", "重庆"]
_ZH_THINGS = [
    "上个月去{p}出差了一周",
    "想知道{p}有什么好吃的小吃",
    "有个老朋友住在{p}",
    "问过{p}的地铁线路",
    "打算暑假带家人去{p}玩",
    "在{p}看过一场演唱会",
    "比较过去{p}的高铁票价",
    "关心{p}下周的天气",
    "收藏了几家{p}的餐厅",
    "对{p}的历史很感兴趣",
    "在{p}租过共享单车",
    "想去{p}看海",
]


def memories() -> list[tuple[str, str, str]]:
    """All 300: the 60 answers, then 120 English and 120 Chinese neighbours."""
    rows = list(TARGETS)
    for i, (place, thing) in enumerate((p, t) for t in _THINGS for p in _PLACES[:10]):
        if i >= 120:
            break
        rows.append(("notes", f"note-{i}", thing.format(p=place)))
    for i, (place, thing) in enumerate((p, t) for t in _ZH_THINGS for p in _ZH_PLACES[:10]):
        if i >= 120:
            break
        rows.append(("notes", f"zh-note-{i}", thing.format(p=place)))
    return rows


# (query, the key it must find in the top 5)
QUERIES: Final[list[tuple[str, str]]] = [
    # English keywords and short questions
    ("which language should replies use", "language"),
    ("backend engineer logistics", "job"),
    ("peanuts", "allergy"),
    ("thesis deadline", "thesis"),
    ("oat milk", "coffee"),
    ("golden retriever", "pet"),
    ("marathon training", "marathon"),
    ("when is the birthday", "birthday"),
    ("Neovim configuration", "editor"),
    ("kitchen contractor", "kitchen"),
    ("Emma violin", "daughter"),
    ("24-hour clock", "units"),
    ("mortgage banks", "mortgage"),
    ("night trains", "travel"),
    ("caffeine insomnia", "insomnia"),
    ("Le Guin novels", "books"),
    ("Canadian visa biometrics", "visa"),
    ("tomatoes basil allotment", "garden"),
    ("online chess rating", "chess"),
    ("jazz while working", "music"),
    # English with a one-character typo
    ("shelfish allergy", "allergy"),
    ("distributed consensis", "thesis"),
    ("retreiver dog", "pet"),
    ("marathn in Berlin", "marathon"),
    ("guitar scalse", "guitar"),
    ("meetngs in the morning", "meetings"),
    ("spanich lessons", "spanish"),
    ("vegetarain diet", "vegetarian"),
    ("photograpy portfolio", "photography"),
    ("kubernets migration", "kubernetes"),
    ("brother in Montrael", "brother"),
    ("climate newsleter", "newsletter"),
    ("houshold budget", "budget"),
    ("dobsonian telescpe", "telescope"),
    ("emoji in relpies", "language"),
    # Chinese, two characters
    ("中文", "zh-language"),
    ("杭州", "zh-job"),
    ("花粉", "zh-allergy"),
    ("考试", "zh-exam"),
    ("普洱", "zh-tea"),
    ("橘猫", "zh-cat"),
    ("钢琴", "zh-piano"),
    ("成都", "zh-hometown"),
    ("香菜", "zh-food"),
    ("学区", "zh-house"),
    ("婚礼", "zh-wedding"),
    ("血压", "zh-health"),
    ("大理", "zh-trip"),
    ("雅思", "zh-english"),
    ("淘宝", "zh-shopping"),
    # Chinese, longer phrases without spaces
    ("用户的妻子做什么工作", "zh-wife"),
    ("他每天早上跑步吗", "zh-sports"),
    ("开什么样的汽车", "zh-car"),
    ("睡前看什么书", "zh-reading"),
    ("想转行做数据工程师", "zh-python"),
    ("周末看什么电影", "zh-movie"),
    ("和父母视频通话", "zh-parents"),
    ("房贷每月还多少", "zh-loan"),
    ("近视多少度", "zh-glasses"),
    ("儿子上几年级", "zh-son"),
]
